"""User-facing errors: one plain line, naming the file, line and field.

The CLI turns a ``UserError`` into ``error: FILE:LINE: field 'x': what`` on stderr and
exit code 2. Library code raises it for anything the user can fix (bad spec, bad row,
missing extra); bugs stay ordinary exceptions with tracebacks.
"""

from __future__ import annotations

from pathlib import Path


class UserError(Exception):
    """An input problem the user can fix; rendered as one line by the CLI."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.field = field

    def __str__(self) -> str:
        parts = []
        if self.file is not None:
            parts.append(f"{self.file}:{self.line}:" if self.line is not None else f"{self.file}:")
        if self.field is not None:
            parts.append(f"field '{self.field}':")
        parts.append(self.message)
        return " ".join(parts).replace("\n", " ")


def missing_extra(extra: str, module: str) -> UserError:
    """The error for a backend/judge/feature whose optional dependency isn't installed."""
    return UserError(f"{module} is not installed: pip install 'userturn[{extra}]'")


def check_readable(path: Path, what: str = "file") -> None:
    """Refuse a missing path or a directory given as a file, in one line."""
    if path.is_dir():
        raise UserError(f"is a directory, expected a {what}", file=str(path))
    if not path.is_file():
        raise UserError(f"{what} not found", file=str(path))


def read_text(path: Path, what: str = "file") -> str:
    """A whole UTF-8 text file, or a one-line error naming the file and the bad byte's line."""
    check_readable(path, what)
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UserError(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
            file=str(path),
            line=line,
        ) from exc


class ResourceError(Exception):
    """The machine ran out of something (disk space): not the user's input, so the CLI
    exits 1, not 2, with this one line, which says what is kept and what to run next."""
