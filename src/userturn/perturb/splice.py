"""Edits of a text by spans, applied in one pass.

The error injections find every place to change first and rebuild the text once, so a
replacement can never be found again and replaced a second time (an injected option text
"Vitamin C" must not have its "C" rewritten by the letter pass that follows).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Edit:
    start: int
    end: int
    text: str


def overlaps(start: int, end: int, taken: list[Edit] | list[tuple[int, int]]) -> bool:
    """Whether ``[start, end)`` overlaps any span in ``taken``."""
    for span in taken:
        lo, hi = (span.start, span.end) if isinstance(span, Edit) else span
        if start < hi and lo < end:
            return True
    return False


def splice(text: str, edits: list[Edit]) -> str:
    """``text`` with each edit's span replaced; edits must not overlap."""
    out, pos = [], 0
    for edit in sorted(edits, key=lambda e: e.start):
        assert edit.start >= pos, "overlapping edits"
        out.append(text[pos : edit.start])
        out.append(edit.text)
        pos = edit.end
    out.append(text[pos:])
    return "".join(out)
