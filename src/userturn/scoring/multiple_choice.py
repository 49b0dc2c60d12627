"""Multiple-choice scoring: find the chosen letter in free text, robustly.

Models reason first and answer last, in many shapes: "Answer: C", "**Answer:** (C)",
"\\boxed{C}", "the correct answer is option C", a last line that is just "C." or "(C)".
Evidence is tried strongest first and the last match of the strongest kind wins, so
"A is wrong because ... Answer: C" gives C. Lower-case letters count only where they
can't be the article "a" (inside parentheses or right after "Answer:"). When no letter is
found, a final line that names exactly one option's text picks that option; the last
resort is the last standalone capital letter. No letter at all is ``extracted: None``,
scored incorrect (the model gave no answer), never guessed.
"""

from __future__ import annotations

import re
from typing import Any

from userturn.scoring.numeric import boxed_contents

LETTERS = "ABCD"


def _tiers(letters: str) -> list[list[re.Pattern[str]]]:
    """Patterns by strength; within a tier the match that comes last in the text wins."""
    up, low = f"[{letters}]", f"[{letters.lower()}]"
    word_end = r"(?![\w'])"
    keyword = [
        rf"(?i:\banswer\b(?:\s+is)?)[\s*:_]*(?i:(?:option|choice)\s*)?[(\[]?({up})[)\]]?"
        + word_end,
        rf"(?m)(?i:\banswer\b)\s*\**:\**\s*\(?({low})\)?(?=\s*$|[.)\]*,;])",
        rf"(?i:\b(?:correct|right|best|final)\s+(?:answer|option|choice)\s+(?:is|would be)"
        rf"\s*(?:option\s+|choice\s+)?)[*(]*({up})\)?" + word_end,
        rf"(?i:\b(?:option|choice)\s+)\(?({up})\)?(?i:\s+is\s+(?:the\s+)?"
        rf"(?:correct|right|best|answer))" + word_end,
    ]
    alone = [rf"(?m)^[\s*#>]*[(\[]?({up})[)\]]?[.)]?[\s*]*$", rf"(?m)^[\s*]*\(({low})\)"]
    paren = [rf"\(({up})\)", rf"\(({low})\)"]
    return [[re.compile(p) for p in tier] for tier in (keyword, alone, paren)]


def extract_letter(
    text: str, options: list[str] | None = None, letters: str = LETTERS
) -> str | None:
    """The chosen letter in ``text`` (upper case), or None."""
    for content in reversed(boxed_contents(text)):
        m = re.fullmatch(rf"\s*(?:\\text\{{)?\(?([{letters}{letters.lower()}])\)?\}}?\s*", content)
        if m:
            return m.group(1).upper()
    for tier in _tiers(letters):
        hits = [(m.start(1), m.group(1)) for pat in tier for m in pat.finditer(text)]
        if hits:
            return max(hits)[1].upper()
    by_text = _by_option_text(text, options or [], letters)
    if by_text:
        return by_text
    loose = [
        m.group(1)
        for m in re.finditer(rf"(?<![\w'\-])([{letters}])(?![\w'\-])", text)
        if m.group(1) != "A" or not re.match(r"\s+[a-z]", text[m.end() :])
    ]
    return loose[-1] if loose else None  # "A" before a lower-case word is the article


def _norm(text: str) -> str:
    return re.sub(r"[\s*_`$.]+", " ", text).strip().lower()


def _by_option_text(text: str, options: list[str], letters: str) -> str | None:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if not lines or not options:
        return None
    last = _norm(lines[-1])
    named = [i for i, opt in enumerate(options) if _norm(opt) and _norm(opt) in last]
    return letters[named[0]] if len(named) == 1 else None


def score_choice(text: str, gold: str, options: list[str] | None = None) -> dict[str, Any]:
    letter = extract_letter(text, options)
    return {"correct": letter == gold, "extracted": letter, "gold": gold}
