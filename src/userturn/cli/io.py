"""Output files written by commands: checked before any work, written atomically.

Why here: several commands write one file (labels, packets, exports). The rules are the
same everywhere: never overwrite an input, overwrite an existing output only with
``--force``, refuse a directory or an unwritable place in one line, and never leave a
half-written file (write a temporary file, then rename).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from userturn.errors import UserError


def check_output(
    path: Path, *, inputs: Iterable[Path] = (), force: bool = False, field: str = "--out"
) -> None:
    """Refuse an output that is an input, a directory, unwritable, or exists without --force."""
    for src in inputs:
        if path.exists() and src.exists() and path.resolve() == src.resolve():
            raise UserError("would overwrite the input file; choose another --out", file=str(path))
    if path.is_dir():
        raise UserError("is a directory, expected a file", file=str(path), field=field)
    if path.exists() and not force:
        raise UserError("exists; pass --force to overwrite it", file=str(path), field=field)
    parent = next((p for p in path.parents if p.exists()), Path("."))
    if not parent.is_dir():
        raise UserError(f"{parent} is a file, not a directory", file=str(path), field=field)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"{parent} is not writable", file=str(path), field=field)


def atomic_lines(path: Path, lines: Iterable[str]) -> None:
    """Write text lines to ``path`` through a temporary file in the same folder."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise UserError(f"cannot write here: {exc.strerror}", file=str(path)) from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Interrupted(Exception):
    """Ctrl-C, with the line to print (``main`` exits 130 with it)."""
