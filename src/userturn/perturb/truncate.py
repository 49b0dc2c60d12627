"""``truncate:<fraction>``: keep the first fraction of the answer's words (default 0.5).

The paper's strongest positive control: a visibly cut-off answer invites "you didn't
finish" from a model that tracks the conversation. We cut at a word boundary so the cut
never splits a token mid-word, which would itself look like an artifact.

Scripts written without spaces (Chinese, Japanese, Thai, Lao, Khmer, Myanmar) have no
word boundaries to find: there each character is a unit (with the combining marks that
belong to it), so ``truncate:`` cuts them too, instead of leaving them whole as one
"word". Spaced words around them still count as one unit each.
"""

from __future__ import annotations

import re
import unicodedata

from userturn.errors import UserError
from userturn.perturb.base import Perturbation

_UNSPACED_RANGES = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x2E80, 0x2FDF),  # CJK radicals
    (0x3000, 0x30FF),  # CJK punctuation, Hiragana, Katakana
    (0x3100, 0x31FF),  # Bopomofo, Katakana extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF01, 0xFF60),  # fullwidth punctuation and forms
    (0xFF61, 0xFF9F),  # halfwidth Katakana
    (0x20000, 0x3134F),  # CJK extensions B-G
)
_LAST_MARK = 0x33FF  # the ideograph blocks after it carry no combining marks
_SPACING_VOWELS = (0x0E33, 0x0EB3)  # Thai/Lao SARA AM: letters, but they join the one before


def _char_class(marks: bool) -> str:
    """The unspaced scripts' code points as a regex class: combining marks only, or all."""
    parts = []
    for lo, hi in _UNSPACED_RANGES:
        if not marks:
            parts.append(f"{re.escape(chr(lo))}-{re.escape(chr(hi))}")
            continue
        for cp in range(lo, min(hi, _LAST_MARK) + 1):
            if unicodedata.category(chr(cp)).startswith("M") or cp in _SPACING_VOWELS:
                parts.append(re.escape(chr(cp)))
    return "".join(parts)


_UNSPACED = _char_class(marks=False)
_MARKS = _char_class(marks=True)
_UNIT = re.compile(rf"[{_UNSPACED}][{_MARKS}]*|[^\s{_UNSPACED}]+")
"""One unspaced-script character with its marks, or a run of anything else but spaces."""


class Truncate(Perturbation):
    version = "2"
    """2: unspaced scripts are cut by character (1 left them whole)."""

    def __init__(self, arg: str = "") -> None:
        try:
            self.fraction = float(arg) if arg else 0.5
        except ValueError as exc:
            raise UserError(
                f"truncate fraction must be a number, got {arg!r}", field="perturb"
            ) from exc
        if not 0.0 < self.fraction < 1.0:
            raise UserError("truncate fraction must be in (0, 1)", field="perturb")

    @property
    def id(self) -> str:
        return f"truncate:{self.fraction:g}"

    def apply(self, answer: str) -> str:
        units = list(_UNIT.finditer(answer))
        if len(units) < 2:
            return answer
        keep = max(1, int(len(units) * self.fraction))
        return answer[: units[keep - 1].end()]
