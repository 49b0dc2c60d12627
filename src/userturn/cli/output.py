"""How commands print tables: one style everywhere, readable at 80 columns, and
``--format json|md|csv`` for scripts.

Why one renderer: ``run`` printed a rich table, ``compare`` Markdown and ``agree``
hand-aligned text, and at 80 columns rich folded words in the middle
(``smollm2-1/35m``). Here every column is at least as wide as its longest value, so
only headers wrap (between words): a row is one line at any width, on a terminal or in
a log. Columns that do not fit move under the grid (the ones marked as detail first),
one entry per row, so the shape of the output never depends on the grid. Machine
formats go to stdout alone: the notes that accompany a table go to stderr there, so
``--format json | jq`` just works.
"""

from __future__ import annotations

import json
import sys
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
FORMAT_HELP = "table, json, md or csv (numbers in machine columns)."
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
    table: Table,
    fmt: Format = "table",
    *,
    detail: Sequence[str] = (),
    key: Sequence[str] = (),
    wrap: Sequence[str] = (),
    keep: Sequence[str] = (),
) -> None:
    """Print ``table`` in ``fmt``. ``detail`` names columns that may move below the grid
    on a narrow terminal, where each row is named by its ``key`` columns (default: the
    first column); ``wrap`` names prose columns whose values may wrap between words;
    ``keep`` the columns that leave the grid last (a table's headline figure)."""
    if fmt == "json":
        print(json.dumps(records(table), indent=2, ensure_ascii=False))
    elif fmt == "md":
        print(table.to_markdown(), end="")
    elif fmt == "csv":
        print(table.to_csv(), end="")
    else:
        render(table, console(), detail, key, wrap, keep)


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
    return [dict(zip(table.raw_columns, row, strict=True)) for row in table.rows]


# the terminal table -------------------------------------------------------------------
def render(
    table: Table,
    out: Console,
    detail: Sequence[str] = (),
    key: Sequence[str] = (),
    wrap: Sequence[str] = (),
    keep: Sequence[str] = (),
) -> None:
    """The grid, one line per row at any width (but for ``wrap`` columns), then the
    columns that did not fit, one entry per row named by its ``key`` columns (or by a
    row number, when a key column had to leave the grid)."""
    if table.title:
        out.print(table.title, markup=False)
    names = [c for c in key if c in table.columns] or list(table.columns[:1])
    cols, widths = layout(table, out.width, detail, names, wrap, keep)
    numbered = not set(names) <= set(cols)
    if numbered:  # rows the grid no longer tells apart get a number to find them below
        digits = len(str(len(table.shown)))
        cols, widths = layout(table, out.width - digits - GAP, detail, names, wrap, keep)
    moved = [c for c in table.columns if c not in cols]
    rows = [_pick(table, r, cols) for r in table.shown]
    if numbered:
        rows = [[str(i), *r] for i, r in enumerate(rows, start=1)]
        cols, widths = ["#", *cols], [digits, *widths]
    out.print(grid(cols, rows, widths))
    if moved:
        out.print(f"{moved[0]}:" if len(moved) == 1 else "more columns:", markup=False)
    for i, row in enumerate(table.shown if moved else [], start=1):
        values = _pick(table, row, moved)
        if len(moved) == 1:
            fields = [("", values[0] or "-")]
        else:
            fields = [(c, v or "-") for c, v in zip(moved, values, strict=True)]
        name = f"#{i}" if numbered else _name(table, row, names)
        for line in entry_lines(f"{name}: ", fields, out.width):
            out.print(line, markup=False, soft_wrap=True, crop=False)
    if table.note:
        out.print(table.note, markup=False)


def layout(
    table: Table,
    width: int,
    detail: Sequence[str],
    names: Sequence[str],
    wrap: Sequence[str] = (),
    keep: Sequence[str] = (),
) -> tuple[list[str], list[int]]:
    """The columns kept in the grid and their widths.

    A value never wraps: a rate folded over three lines ("26.0%" / "[15.9%," / "39.6%]")
    cannot be read in a log, and a log is where most runs are read. So columns leave the
    grid until the rest fits whole: the ``detail`` columns first, in their order, then the
    others from the right, then the key columns that name a row (widest first; the first
    column stays), the ``keep`` columns last. Then each column that left goes back, the
    last to leave first, wherever it still fits."""
    every = list(table.columns)
    order = [c for c in detail if c in every]
    order += [c for c in reversed(every) if c not in order and c not in names and c not in keep]
    keys = [c for c in every if c in names and c != every[0]]
    order += sorted(keys, key=lambda c: -max(cell_len(v) for v in _column(table, c)))
    order += [c for c in every if c in keep and c not in names]
    cols, left = list(every), []
    widths = _fit(table, cols, width, wrap)
    for leaving in order:
        if widths is not None:
            break
        cols.remove(leaving)
        left.append(leaving)
        widths = _fit(table, cols, width, wrap)
    for back in reversed(left):
        trial = [c for c in every if c in cols or c == back]
        if (found := _fit(table, trial, width, wrap)) is not None:
            cols, widths = trial, found
    if widths is None:  # one column wider than the screen: printed whole, past the edge
        widths = [max(cell_len(v) for v in _column(table, c)) for c in cols]
    return cols, widths


def _fit(table: Table, cols: list[str], width: int, wrap: Sequence[str]) -> list[int] | None:
    return fit(cols, [_pick(table, r, cols) for r in table.shown], width, wrap)


def entry_lines(head: str, fields: list[tuple[str, str]], width: int, indent: int = 2) -> list[str]:
    """``  name: col a; col b`` wrapped between fields; a field too long for a line of its
    own breaks between its column and its value, then between the items of a
    comma-separated value, never inside an item (a rate and its CI stay together).
    Later lines are indented past the first."""
    lines = [" " * indent + head.rstrip()]
    pad = " " * (indent + 4)

    def put(text: str) -> None:
        if cell_len(lines[-1] + " " + text) <= width:
            lines[-1] += " " + text
        else:
            lines.append(pad + text)

    for i, (label, value) in enumerate(fields):
        end = ";" if i < len(fields) - 1 else ""
        whole = (f"{label} {value}" if label else value) + end
        if cell_len(lines[-1] + " " + whole) > width and cell_len(pad + whole) <= width:
            lines.append(pad + whole)
            continue
        items = _items(value)
        parts = [label] if label else []
        parts += [item + ("," if j < len(items) - 1 else end) for j, item in enumerate(items)]
        for part in parts:
            put(part)
    return lines


def _items(text: str) -> list[str]:
    """Split at ``, `` outside brackets: ``26.0% [15.9%, 39.6%]`` stays one item."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        elif depth == 0 and text.startswith(", ", i):
            items.append(text[start:i])
            start = i + 2
    return [*items, text[start:]]


def _column(table: Table, col: str) -> list[str]:
    i = table.columns.index(col)
    return [col, *(r[i] for r in table.shown)]


def _pick(table: Table, row: list[str], cols: list[str]) -> list[str]:
    return [row[table.columns.index(c)] for c in cols]


def _name(table: Table, row: list[str], cols: list[str]) -> str:
    """A row's name from its key columns; a number keeps its column (``T=0``, ``turn=2``)."""
    values = _pick(table, row, cols)
    return " ".join(
        f"{c}={v}" if v.replace(".", "", 1).isdigit() else v
        for c, v in zip(cols, values, strict=True)
    )


def _longest_word(text: str) -> int:
    return max((cell_len(w) for w in text.split()), default=0)


def fit(
    cols: list[str], rows: list[list[str]], width: int, wrap: Sequence[str] = ()
) -> list[int] | None:
    """Column widths that fit ``width`` with every value whole, or None.

    Start from each column's natural width and narrow, one cell at a time, the column
    with the most room left, down to its widest value (so only headers wrap, between
    words), or for a ``wrap`` column down to its longest word."""
    natural = [max([cell_len(c), *(cell_len(r[i]) for r in rows)]) for i, c in enumerate(cols)]
    least = []
    for i, col in enumerate(cols):
        value = _longest_word if col in wrap else cell_len
        least.append(max([_longest_word(col), *(value(r[i]) for r in rows), 1]))
    room = width - GAP * (len(cols) - 1) - 1  # the last column keeps its right padding
    return _narrow(natural, least, room) if sum(least) <= room else None


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
