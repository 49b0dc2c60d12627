"""Whole-file writes that never leave a half-written or stray file, and the one message
for a full disk.

Why unique temporary names: two processes (or a library caller beside a CLI run) writing
``records.jsonl.tmp`` at once truncate and rename each other's files. ``mkstemp`` gives
each writer its own name in the target's folder (so the rename is atomic), and any
failure removes it, so a full disk is not kept full by our own leftovers.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from userturn.errors import ResourceError, UserError

NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
CHUNK = 1 << 20
RESUME = "free some space, then run the same command again (what is stored is reused)"


def no_space(exc: BaseException) -> bool:
    """An OSError (or pyarrow's, which carries the errno only in its text) for a full disk."""
    if isinstance(exc, OSError) and exc.errno in NO_SPACE:
        return True
    text = str(exc)
    return isinstance(exc, OSError) and ("No space left" in text or "Disk quota" in text)


def space_error(path: Path, kept: str) -> ResourceError:
    """The disk-full line: which file, what is kept, what to run."""
    return ResourceError(f"{path}: no space left on the device; {kept}; {RESUME}")


@contextmanager
def replacing(path: Path, kept: str) -> Iterator[Path]:
    """A fresh temporary path beside ``path``, renamed over it when the block succeeds and
    removed when it fails. OSErrors become one line (``kept`` says what survives)."""
    try:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 would hide outputs from the group
        os.close(fd)
    except OSError as exc:
        raise _one_line(exc, path, kept) from None
    tmp = Path(name)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _one_line(exc, path, kept) from None
        raise


def write_chunks(path: Path, chunks: Iterable[str], kept: str) -> None:
    """Write text to ``path`` atomically, in ~1 MiB ``os.write`` calls."""
    with replacing(path, kept) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC)
        try:
            _drain(fd, chunks)
            os.fsync(fd)
        finally:
            os.close(fd)


def _drain(fd: int, chunks: Iterable[str]) -> None:
    buf: list[bytes] = []
    size = 0
    for chunk in chunks:
        data = chunk.encode("utf-8")
        buf.append(data)
        size += len(data)
        if size >= CHUNK:
            _write_all(fd, b"".join(buf))
            buf, size = [], 0
    _write_all(fd, b"".join(buf))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _one_line(exc: OSError, path: Path, kept: str) -> Exception:
    if no_space(exc):
        return space_error(path, kept)
    return UserError(f"cannot write: {exc.strerror or exc}", file=str(path))
