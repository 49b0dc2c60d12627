"""One writer per run directory: an advisory ``fcntl.flock`` on ``DIR/userturn.lock``.

Why: SQLite keeps the store itself consistent under two writers, but what a command does
with it is not: ``judge --run`` computes its pending turns from a snapshot, and every
writer rebuilds records.jsonl, summary.json and records.parquet from the store. Two at
once re-do each other's paid calls and interleave their outputs. So the second writer is
refused at once, in one line naming the holder, rather than made to wait behind a run
that may take hours; it can simply be run again when the first one is done.

The lock is advisory and tied to the open file: the kernel drops it when the holder exits
or is killed, so a crash never leaves a stale lock. The file itself stays (deleting a
lock file races with a process about to lock it). Readers (``report``, ``load_run``)
take no lock: every output is replaced by an atomic rename, so they see the old file or
the new one. The lock is re-entrant within a process (``recover`` locks, then opens the
run again to write its outputs).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from userturn.errors import UserError

LOCK_NAME = "userturn.lock"
_HELD: dict[Path, int] = {}
"""Resolved run directory -> how many nested holders in this process."""


class RunBusy(UserError):
    """Another process is writing this run directory."""


def _holder(fd: int) -> str:
    """Who holds the lock, from what it wrote into the file (best effort)."""
    try:
        raw = os.pread(fd, 4096, 0)
        info = json.loads(raw.decode("utf-8"))
        return f"pid {int(info['pid'])}, userturn {info['command']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


@contextmanager
def run_lock(run_dir: Path, command: str) -> Iterator[None]:
    """Hold the run directory's writer lock; refuse in one line if another process has it.

    ``command`` (``run``, ``judge``, ``recover``...) is written into the lock file so the
    refusal can say who is writing; never the full command line, which may hold secrets.
    """
    key = run_dir.resolve()
    if key in _HELD:
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    path = run_dir / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise UserError(f"cannot create the lock file: {exc.strerror}", file=str(path)) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = _holder(fd)
        os.close(fd)
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise UserError(
                f"cannot lock the run directory: {exc.strerror}", file=str(path)
            ) from exc
        raise RunBusy(
            f"another userturn process ({holder}) is writing this run directory; "
            "run this command again when it has finished",
            file=str(run_dir),
        ) from None
    _HELD[key] = 1
    try:
        _stamp(fd, command)
        yield
    finally:
        _HELD.pop(key, None)
        os.close(fd)  # releases the lock


def _stamp(fd: int, command: str) -> None:
    """Write the holder's pid and command; a full disk only loses the description."""
    data = json.dumps({"pid": os.getpid(), "command": command}).encode()
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
