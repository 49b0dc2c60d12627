"""The multiple-choice half of ``inject-error``: another option, by letter and by text.

The letter changed is the one the scorer reads (``scoring.multiple_choice.extract_letter``).
The new letter is drawn from the seed among the options that are neither the gold nor the
original. Every standalone mention of the original letter becomes the new one ("Answer:
C", "(C)", "option C", ``\\boxed{C}``, "(c)"), and every quote of the original option's
text becomes the new option's text, in one pass, so an injected text is never edited
again. Two things are left alone:

- an article "A" ("A photon is ..."): a capital A before a lower-case word is a letter
  only when that word is a verb or conjunction ("A is wrong", "A and C") or after a cue
  such as "answer", "option", "choice" or "is";
- the answer's own list of the options ("A) Oxygen" / "B) Nitrogen" ...): it restates
  the question, so swapping two entries would only garble it.
"""

from __future__ import annotations

import random
import re

from userturn.perturb.inject_numeric import Change, Injection
from userturn.perturb.splice import Edit, overlaps, splice
from userturn.scoring.multiple_choice import LETTERS, extract_letter

_CUE = re.compile(r"(?i:\b(?:answer|option|choice|is)\b)[\s:*_(\[]*$")
_ARTICLE = re.compile(
    r"\s+(?!(?:is|was|seems|looks|would|could|can|cannot|might|must|and|or|fits|matches|"
    r"gives|has|does|doesn't|isn't|also|only|then|because|since|as)\b)[a-z]"
)
"""After an article "A": a lower-case word that isn't a verb or conjunction ("A is
wrong" names option A; "A ball" doesn't)."""
_LIST_LINE = re.compile(r"(?m)^[ \t*>-]*[(\[]?([A-Z])[).:\]][ \t]*(.+?)[ \t]*$")


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def option_list_lines(text: str, options: list[str]) -> list[tuple[int, int]]:
    """Spans of lines that list an option by its own letter, when two or more do."""
    spans = []
    for m in _LIST_LINE.finditer(text):
        i = LETTERS.find(m.group(1))
        if 0 <= i < len(options) and _norm(m.group(2)) == _norm(options[i]):
            spans.append((m.start(), m.end()))
    return spans if len(spans) >= 2 else []


def _quoted(option: str) -> re.Pattern[str]:
    """The option's text as a whole phrase, case-insensitive, spacing-tolerant."""
    body = r"\s+".join(re.escape(w) for w in option.split())
    left = r"(?<!\w)" if option[:1].isalnum() else ""
    right = r"(?!\w)" if option[-1:].isalnum() else ""
    return re.compile(left + body + right, re.I)


def _letters(text: str, letter: str) -> list[tuple[int, int]]:
    """Spans where ``letter`` names a choice: standalone capitals (not the article "A"),
    and the lower-case letter in parentheses or right after "Answer:"."""
    spans = []
    for m in re.finditer(rf"(?<![\w'\-]){letter}(?![\w'\-])", text):
        article = letter == "A" and _ARTICLE.match(text, m.end())
        if not article or _CUE.search(text[max(0, m.start() - 30) : m.start()]):
            spans.append(m.span())
    low = letter.lower()
    pattern = rf"\(({low})\)|(?i:\banswer\b)\s*\**:\**\s*\(?({low})(?![\w'\-])"
    for m in re.finditer(pattern, text):
        group = 1 if m.group(1) else 2
        spans.append(m.span(group))
    return spans


def _match_case(found: str, text: str) -> str:
    """A quote in lower case ("nitrogen") gets the new text in lower case ("carbon
    dioxide"), for a capitalised word only ("DNA" stays as it is)."""
    if found[:1].islower() and text[:1].isupper() and text[1:2].islower():
        return text[0].lower() + text[1:]
    return text


def _quotes(text: str, option: str) -> list[tuple[int, int]]:
    return [m.span() for m in _quoted(option).finditer(text)] if option.strip() else []


def _edits(text: str, old: tuple[str, str], new: tuple[str, str], options: list[str]) -> list[Edit]:
    """Quotes of the old option's text, then letters outside any option's text ("Vitamin
    C" keeps its C); nothing inside the answer's own list of the options."""
    keep = option_list_lines(text, options)
    edits = [
        Edit(start, end, _match_case(text[start:end], new[1]))
        for start, end in _quotes(text, old[1])
        if not overlaps(start, end, keep)
    ]
    keep += [span for option in options for span in _quotes(text, option)]
    for start, end in _letters(text, old[0]):
        if not overlaps(start, end, keep):
            letter = new[0] if text[start:end].isupper() else new[0].lower()
            edits.append(Edit(start, end, letter))
    return edits


def swap_choice(
    text: str, old: tuple[str, str], new: tuple[str, str], options: list[str]
) -> tuple[str, int]:
    """``text`` with (letter, option text) ``old`` swapped for ``new`` (option lists
    kept), and the number of places changed."""
    edits = _edits(text, old, new, options)
    return splice(text, edits), len(edits)


def inject_choice(answer: str, gold: str, options: list[str], seed: int) -> Injection:
    """Swap the chosen option for another wrong one; see the module doc."""
    letters = LETTERS[: len(options)]
    original = extract_letter(answer, options, letters)
    if original is None:
        return Injection(answer, reason="the answer names no option")
    pool = [c for c in letters if c not in (gold, original)]
    if not pool:
        return Injection(answer, original, reason="no other wrong option")
    injected = random.Random(seed).choice(pool)
    old = (original, options[letters.index(original)])
    new = (injected, options[letters.index(injected)])
    edits = _edits(answer, old, new, options)
    text = splice(answer, edits)
    if not edits or extract_letter(text, options, letters) != injected:
        return Injection(answer, original, injected, reason="the scorer would not read it back")
    changes = tuple(
        Change(e.start, e.end, answer[e.start : e.end], e.text)
        for e in sorted(edits, key=lambda e: e.start)
    )
    return Injection(text, original, injected, len(edits), None, changes)
