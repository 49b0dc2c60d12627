"""How commands print tables: one style everywhere, readable at 80 columns, and
``--format json|md|csv`` for scripts.

Why one renderer: ``run`` printed a rich table, ``compare`` Markdown and ``agree``
hand-aligned text, and at 80 columns rich folded words in the middle
(``smollm2-1/35m``). Here every column is at least as wide as its longest word, so text
wraps only between words. When even that does not fit, the columns marked as detail
move under the grid, one line each; when it still does not fit, each row is printed as
a stack of ``column: value`` lines. Machine formats go to stdout alone: the notes that
accompany a table go to stderr there, so ``--format json | jq`` just works.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, Literal, cast

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table as RichTable

from userturn.analysis.tables import Table
from userturn.errors import UserError

Format = Literal["table", "json", "md", "csv"]
FORMATS: tuple[Format, ...] = ("table", "json", "md", "csv")
FORMAT_HELP = "table (default), json, md or csv."
GAP = 3
"""Cells between two columns: one padding space each side plus the separator."""


def check_format(raw: str, flag: str = "--format") -> Format:
    if raw not in FORMATS:
        raise UserError(f"expected one of {', '.join(FORMATS)}, got {raw!r}", field=flag)
    return cast(Format, raw)


def console() -> Console:
    """stdout, created per call so tests capturing stdout see the text."""
    return Console(file=sys.stdout, highlight=False, soft_wrap=False)


def err_console() -> Console:
    return Console(file=sys.stderr, highlight=False)


def emit(table: Table, fmt: Format = "table", *, detail: Sequence[str] = ()) -> None:
    """Print ``table`` in ``fmt``; ``detail`` names columns that may move below the grid."""
    if fmt == "json":
        print(json.dumps(records(table), indent=2, ensure_ascii=False))
    elif fmt == "md":
        print(table.to_markdown(), end="")
    elif fmt == "csv":
        print(table.to_csv(), end="")
    else:
        render(table, console(), detail)


def note(text: str, fmt: Format = "table") -> None:
    """A line that goes with a table: stdout beside a terminal table, else stderr."""
    if fmt == "table":
        console().print(text, soft_wrap=False, markup=False)
    else:
        print(text, file=sys.stderr)


def records(table: Table) -> list[dict[str, Any]]:
    return [dict(zip(table.columns, row, strict=True)) for row in table.rows]


# the terminal table -------------------------------------------------------------------
def render(table: Table, out: Console, detail: Sequence[str] = ()) -> None:
    if table.title:
        out.print(table.title, markup=False)
    cols = list(table.columns)
    widths = fit(cols, table.shown, out.width)
    moved: list[str] = []
    if widths is None and detail:
        moved = [c for c in cols if c in detail]
        cols = [c for c in cols if c not in detail]
        widths = fit(cols, [_pick(table, r, cols) for r in table.shown], out.width)
    if widths is None:
        stack(table, out)
        return
    out.print(grid(cols, [_pick(table, r, cols) for r in table.shown], widths))
    for row in table.shown:
        for col in moved:
            value = row[table.columns.index(col)]
            if value.strip():
                out.print(f"  {_key(table, row)}: {col}: {value}", markup=False)
    if table.note:
        out.print(table.note, markup=False)


def _pick(table: Table, row: list[str], cols: list[str]) -> list[str]:
    return [row[table.columns.index(c)] for c in cols]


def _key(table: Table, row: list[str]) -> str:
    """The first columns of a row, as its name in the lines under the grid."""
    return " ".join(v for v in row[: min(3, len(row))] if v)


def _longest_word(text: str) -> int:
    return max((cell_len(w) for w in text.split()), default=0)


def fit(cols: list[str], rows: list[list[str]], width: int) -> list[int] | None:
    """Column widths that fit ``width`` without splitting a word, or None.

    Start from each column's natural width; while too wide, narrow the column with the
    most room above its longest word, one cell at a time."""
    natural = [max([cell_len(c), *(cell_len(r[i]) for r in rows)]) for i, c in enumerate(cols)]
    least = [max([_longest_word(c), *(_longest_word(r[i]) for r in rows), 1]) for i, c in enumerate(cols)]
    overhead = GAP * (len(cols) - 1)
    if sum(least) + overhead > width:
        return None
    widths = list(natural)
    excess = sum(widths) + overhead - width
    while excess > 0:
        i = max(range(len(widths)), key=lambda j: widths[j] - least[j])
        widths[i] -= 1
        excess -= 1
    return widths


def grid(cols: list[str], rows: list[list[str]], widths: list[int]) -> RichTable:
    t = RichTable(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for col, w in zip(cols, widths, strict=True):
        t.add_column(col, width=w, overflow="fold")
    for row in rows:
        t.add_row(*row)
    return t


def stack(table: Table, out: Console) -> None:
    """Each row as ``column: value`` lines: readable at any width."""
    for i, row in enumerate(table.shown):
        if i:
            out.print()
        for col, value in zip(table.columns, row, strict=True):
            out.print(f"{col}: {value}", markup=False)
    if table.note:
        out.print(table.note, markup=False)
