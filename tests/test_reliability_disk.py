"""A full disk: exit 1 with one line that is true (what is kept) and a command that works
(the same command, once there is space), and no partial ``.tmp`` file left to keep the
disk full.

Three ways to fill it: ``os.write`` failing with ENOSPC (the OS boundary the output
writer goes through; runs anywhere), SQLite's own page limit (SQLITE_FULL, the code a
full disk gives), and a real 1-2 MB tmpfs (needs root; skipped elsewhere).
Run: ``.venv/bin/python -m pytest tests/test_reliability_disk.py -q``
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from reliability_helpers import write_items
from userturn.cli import main
from userturn.errors import ResourceError
from userturn.rundir.records import UserTurnRecord
from userturn.rundir.store import Store, open_run


def _args(data: Path, out: Path) -> list[str]:
    gen = ["run", "--model", "fake:d", "--dataset", f"jsonl:{data}", "--temperatures", "0"]
    return [*gen, "--judge", "rules", "--out", str(out)]


def _one_error(err: str) -> str:
    lines = [x for x in err.strip().splitlines() if not x.startswith("progress ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _leftovers(d: Path) -> list[str]:
    return [p.name for p in d.iterdir() if p.name.endswith(".tmp")]


def test_outputs_on_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    data = write_items(tmp_path / "items.jsonl", 4)
    out = tmp_path / "run"
    real_write = os.write
    written = [0]

    def full(fd: int, data: bytes) -> int:
        """The first 100 bytes go through, then the disk is full."""
        if written[0] >= 100:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = real_write(fd, bytes(data[: 100 - written[0]]))
        written[0] += n
        return n

    monkeypatch.setattr(os, "write", full)
    capfd.readouterr()
    assert main(_args(data, out)) == 1
    line = _one_error(capfd.readouterr().err)
    assert line.startswith(f"error: {out / 'records.jsonl'}: no space left on the device"), line
    assert "the store is intact and holds every record" in line
    assert "free some space, then run the same command again" in line
    assert _leftovers(out) == [] and not (out / "records.jsonl").exists()
    with open_run(out) as store:
        assert store.count_records() == 4
    monkeypatch.setattr(os, "write", real_write)  # space again: the command it named works
    assert main(_args(data, out)) == 0
    stats = json.loads((out / "run_stats.json").read_text())
    assert stats["generated"] == 0 and stats["reused"] == 4
    assert len((out / "records.jsonl").read_text().splitlines()) == 4


def _turn(store: Store, i: int) -> UserTurnRecord:
    return replace(next(store.user_turns()), key=f"pad{i}", user_turn="y" * 4000)


def test_store_on_a_full_disk_says_it_is_intact(tmp_path: Path) -> None:
    data = write_items(tmp_path / "items.jsonl", 2)
    out = tmp_path / "run"
    assert main(_args(data, out)) == 0
    store = open_run(out)
    try:
        pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
        store.conn.execute(f"PRAGMA max_page_count = {pages}")  # SQLITE_FULL from here on
        with pytest.raises(ResourceError) as info:
            for i in range(50):
                store.put_user_turn(_turn(store, i))
    finally:
        store.close()
    msg = str(info.value)
    assert msg.startswith(f"{out / 'store.sqlite'}: no space left on the device"), msg
    assert "passed its integrity check and keeps every committed row" in msg
    assert "not a usable run store" not in msg and "recover" not in msg
    con = sqlite3.connect(out / "store.sqlite")
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()


def test_a_damaged_store_without_records_does_not_point_to_them(tmp_path: Path) -> None:
    data = write_items(tmp_path / "items.jsonl", 2)
    out = tmp_path / "run"
    assert main(_args(data, out)) == 0
    (out / "records.jsonl").unlink()
    raw = bytearray((out / "store.sqlite").read_bytes())
    raw[:100] = bytes(100)
    (out / "store.sqlite").write_bytes(bytes(raw))
    with pytest.raises(Exception, match=r"no records\.jsonl to rebuild it from") as info:
        open_run(out)
    assert "userturn recover" not in str(info.value)


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A real tmpfs of 1.5 MB (root only)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1536k", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_real_full_disk(
    tiny_disk: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    data = write_items(tmp_path / "items.jsonl", 60, pad=12_000)  # ~1.4 MB in the store
    out = tiny_disk / "run"
    capfd.readouterr()
    code = main(_args(data, out))
    line = _one_error(capfd.readouterr().err)
    assert code == 1, line
    assert "no space left on the device" in line and "run the same command again" in line
    assert "not a usable run store" not in line
    assert _leftovers(out) == []
    con = sqlite3.connect(out / "store.sqlite")
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    subprocess.run(["mount", "-o", "remount,size=16m", str(tiny_disk)], check=True)
    assert main(_args(data, out)) == 0  # the command it named, with space again
    assert len((out / "records.jsonl").read_text().splitlines()) == 60
