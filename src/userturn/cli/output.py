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
import textwrap
from collections.abc import Sequence
from typing import Any, Literal

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table as RichTable

from userturn.analysis.tables import Table
from userturn.errors import UserError

Format = Literal["table", "json", "md", "csv"]
FORMATS: tuple[Format, ...] = ("table", "json", "md", "csv")
FORMAT_HELP = "table (default), json, md or csv."
GAP = 2
"""Cells between two columns: one padding space and the (blank) separator."""


def check_format(raw: str, flag: str = "--format") -> Format:
    if raw not in FORMATS:
        raise UserError(f"expected one of {', '.join(FORMATS)}, got {raw!r}", field=flag)
    return raw


def console() -> Console:
    """stdout, created per call so tests capturing stdout see the text."""
    return Console(file=sys.stdout, highlight=False, soft_wrap=False)


def emit(
    table: Table, fmt: Format = "table", *, detail: Sequence[str] = (), key: Sequence[str] = ()
) -> None:
    """Print ``table`` in ``fmt``. ``detail`` names columns that may move below the grid
    on a narrow terminal, where each row is named by its ``key`` columns (default: the
    first column)."""
    if fmt == "json":
        print(json.dumps(records(table), indent=2, ensure_ascii=False))
    elif fmt == "md":
        print(table.to_markdown(), end="")
    elif fmt == "csv":
        print(table.to_csv(), end="")
    else:
        render(table, console(), detail, key)


def say(text: str) -> None:
    """A line of prose on stdout: wrapped between words on a terminal, one line in a
    file or pipe (a log keeps the sentence whole, grep finds it)."""
    out = console()
    out.print(text, soft_wrap=not out.is_terminal, markup=False)


def note(text: str, fmt: Format = "table") -> None:
    """A line that goes with a table: stdout beside a terminal table, else stderr."""
    if fmt == "table":
        say(text)
    else:
        print(text, file=sys.stderr)


def records(table: Table) -> list[dict[str, Any]]:
    return [dict(zip(table.columns, row, strict=True)) for row in table.rows]


# the terminal table -------------------------------------------------------------------
def render(table: Table, out: Console, detail: Sequence[str] = (), key: Sequence[str] = ()) -> None:
    if table.title:
        out.print(table.title, markup=False)
    cols, moved, widths = _layout(table, out.width, detail)
    if widths is None:
        stack(table, out)
        return
    out.print(grid(cols, [_pick(table, r, cols) for r in table.shown], widths))
    names = [c for c in key if c in cols] or cols[:1]
    if moved:
        out.print(f"{moved[0]}:" if len(moved) == 1 else "more columns:", markup=False)
    for row in table.shown:
        values = _pick(table, row, moved)
        if len(moved) == 1:
            text = values[0] or "-"
        else:
            text = "; ".join(f"{c} {v or '-'}" for c, v in zip(moved, values, strict=True))
        if moved:
            _hanging(out, f"{_name(table, row, names)}: {text}", indent=2)
    if table.note:
        out.print(table.note, markup=False)


def _layout(
    table: Table, width: int, detail: Sequence[str]
) -> tuple[list[str], list[str], list[int] | None]:
    """Columns in the grid, columns moved below it, and the grid's widths (None: stack).

    Whole values beat keeping the detail columns in the grid: a table whose every rate
    wraps over three lines is harder to read than one with its labels listed below."""
    every = list(table.columns)
    kept = [c for c in every if c not in detail]
    tries = [(every, False), (kept, False), (every, True), (kept, True)]
    for cols, wrap in tries if detail else tries[::2]:
        widths = fit(cols, [_pick(table, r, cols) for r in table.shown], width, wrap)
        if widths is not None:
            return cols, [c for c in every if c not in cols], widths
    return every, [], None


def _hanging(out: Console, text: str, indent: int) -> None:
    """One wrapped entry: later lines indented past the first, words kept whole."""
    lines = textwrap.wrap(
        text,
        width=max(out.width, 20),
        initial_indent=" " * indent,
        subsequent_indent=" " * (indent + 4),
        break_long_words=False,
        break_on_hyphens=False,
    )
    for line in lines or [""]:
        out.print(line, markup=False, soft_wrap=True)


def _pick(table: Table, row: list[str], cols: list[str]) -> list[str]:
    return [row[table.columns.index(c)] for c in cols]


def _name(table: Table, row: list[str], cols: list[str]) -> str:
    """A row's name from its key columns; a short column name is kept (``T=0``)."""
    values = _pick(table, row, cols)
    return " ".join(f"{c}={v}" if len(c) <= 2 else v for c, v in zip(cols, values, strict=True))


def _longest_word(text: str) -> int:
    return max((cell_len(w) for w in text.split()), default=0)


def fit(
    cols: list[str], rows: list[list[str]], width: int, wrap_values: bool = True
) -> list[int] | None:
    """Column widths that fit ``width`` without splitting a word, or None.

    Start from each column's natural width and narrow, one cell at a time, the column
    with the most room left: first down to its widest value (only headers wrap), and if
    that is not enough and ``wrap_values``, down to its longest word (values wrap between
    words)."""
    natural = [max([cell_len(c), *(cell_len(r[i]) for r in rows)]) for i, c in enumerate(cols)]
    head = [_longest_word(c) for c in cols]
    whole = [max([h, *(cell_len(r[i]) for r in rows), 1]) for i, h in enumerate(head)]
    words = [max([h, *(_longest_word(r[i]) for r in rows), 1]) for i, h in enumerate(head)]
    room = width - GAP * (len(cols) - 1) - 1  # the last column keeps its right padding
    for least in (whole, words) if wrap_values else (whole,):
        if sum(least) <= room:
            return _narrow(natural, least, room)
    return None


def _narrow(widths: list[int], least: list[int], room: int) -> list[int]:
    widths = list(widths)
    for _ in range(max(0, sum(widths) - room)):
        i = max(range(len(widths)), key=lambda j: widths[j] - least[j])
        widths[i] -= 1
    return widths


def grid(cols: list[str], rows: list[list[str]], widths: list[int]) -> RichTable:
    t = RichTable(box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0), header_style="bold")
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
            _hanging(out, f"{col}: {value}", indent=0)
    if table.note:
        out.print(table.note, markup=False)
