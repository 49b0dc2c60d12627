"""The multiple-choice half of ``inject-error``: another option, by letter and by text,
written only where the answer concludes it.

The letter changed is the one the scorer reads (``scoring.multiple_choice.extract_letter``).
The new letter is drawn from the seed among the options that are neither the gold nor the
original. A *mention* of the chosen option is a standalone letter ("Answer: C", "(C)",
"option C", ``\\boxed{C}``, "(c)") or a quote of the option's text; the answer is read as
statements (lines, split again at sentence ends). Only the conclusion changes:

- a statement *states* the choice when it has a word of conclusion or selection
  ("answer", "correct", "best", "therefore", "so", "choose", ...), is the choice alone
  ("C.", ``\\boxed{C}``, "(C) Iron"), or ends on it after "is", "=" or ":" ("Most of
  the air is nitrogen.", "d = g t^2 / 2 = 20 m");
- the final statement is the last one that states the choice, with the statements that
  state it just before it ("Therefore the answer is C." / "Answer: C" / ``\\boxed{C}``);
  a final statement that stands alone after reasons ("C is right. Nitrogen dominates.
  \\boxed{C}") also takes the statement before them that selected the choice;
- every other mention stays: premises and discussion ("Option C (Iron) binds oxygen.",
  "C is tempting, but ..."), the options quoted inline, reasons given after the final
  statement. The injected answer then reads as a wrong pick, not as one that rewrites its
  own reasoning. An answer with no stating statement has its last mentioning statement
  changed (the scorer reads the last letter), and so does one whose scorer reads the
  choice there rather than in the final statement (the option's text on the last line
  after "I think it's C.").

Within a concluding statement the letter and the option's text both change, in one pass,
so an injected text is never edited again. Three things are always left alone: the
article "A" ("A photon is ..."; a capital A before a lower-case word is a letter only when
that word is a verb or conjunction, or after a cue such as "answer", "option", "choice" or
"is"); letters inside any option's text ("Vitamin C"); and the answer's own list of the
options ("A) Oxygen" / "B) Nitrogen" ...), which restates the question.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

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
_STATEMENT_END = re.compile(r"\n|(?<=[.!?])[ \t]+(?=[A-Z(\[\\*#])")
"""Where a statement ends: a newline, or a sentence end before a capital or markup."""
_CONCLUDES = re.compile(
    r"(?i)\b(?:answer|correct|right|best|final|therefore|thus|hence|so|choose|chose|"
    r"choosing|select|selected|pick|go\s+with|conclu\w*)\b"
)
_PREDICATE = re.compile(
    r"(?:\b(?:is|are|be|was)|['\u2019]s|[=:\u2192])(?:\s*(?:option|choice))?[\s*_(\[$\\]*$", re.I
)
"""What comes before a choice a statement ends on ("the gas is nitrogen.", "it's C.",
"= 20 m", "key: C.", "which is option C."), unlike a list of the options ("..., (D) 5
m.")."""
_FILLER = re.compile(r"[\W_]|\b(?:boxed|text|option|choice)\b", re.I)
"""What a statement may hold besides the choice and still be "the choice alone"."""


@dataclass(frozen=True)
class Mention:
    start: int
    end: int
    letter: bool
    """A letter (else a quote of the option's text)."""


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


def _mentions(text: str, old: tuple[str, str], options: list[str]) -> list[Mention]:
    """Quotes of the old option's text, then its letter outside any option's text
    ("Vitamin C" keeps its C); nothing inside the answer's own list of the options."""
    keep = option_list_lines(text, options)
    found = [
        Mention(start, end, False)
        for start, end in _quotes(text, old[1])
        if not overlaps(start, end, keep)
    ]
    keep += [span for option in options for span in _quotes(text, option)]
    found += [
        Mention(start, end, True)
        for start, end in _letters(text, old[0])
        if not overlaps(start, end, keep)
    ]
    return sorted(found, key=lambda m: m.start)


def _statements(text: str) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for m in _STATEMENT_END.finditer(text):
        spans.append((pos, m.start()))
        pos = m.end()
    spans.append((pos, len(text)))
    return [(lo, hi) for lo, hi in spans if hi > lo]


def _states(text: str, lo: int, hi: int, inside: list[Mention]) -> bool:
    """Whether the statement ``[lo, hi)`` states the choice its ``inside`` mentions name:
    a word of conclusion, the choice alone, or the choice last."""
    body = text[lo:hi]
    if _CONCLUDES.search(body):
        return True
    rest = splice(body, [Edit(m.start - lo, m.end - lo, " ") for m in inside])
    if not _FILLER.sub("", rest).strip():
        return True
    last = inside[-1]
    ends_on_it = not re.sub(r"[\W_]", "", text[last.end : hi])
    return ends_on_it and bool(_PREDICATE.search(text[lo : last.start]))


def conclusion(
    text: str, old: tuple[str, str], options: list[str], last: bool = False
) -> tuple[list[Mention], int]:
    """The mentions of ``old`` (letter, option text) that conclude ``text``, and how many
    other mentions were kept; see the module doc. ``last``: the last statement that
    mentions the option concludes too (where the scorer read it)."""
    found = _mentions(text, old, options)
    groups = []
    for lo, hi in _statements(text):
        inside = [m for m in found if lo <= m.start < hi]
        if inside:
            groups.append((_states(text, lo, hi, inside), inside))
    stating = [i for i, (states, _) in enumerate(groups) if states]
    if not stating:
        chosen = groups[-1][1] if groups else []
        return chosen, len(found) - len(chosen)
    first = stating[-1]
    while first > 0 and groups[first - 1][0]:
        first -= 1
    picked = list(range(first, stating[-1] + 1))
    if len(picked) == 1 and len(stating) > 1:  # the final statement alone: add the one
        picked.insert(0, stating[-2])  # that selected it, across the reasons between
    if last and picked[-1] != len(groups) - 1:
        picked.append(len(groups) - 1)
    chosen = [m for i in picked for m in groups[i][1]]
    return chosen, len(found) - len(chosen)


def _edits(
    text: str, old: tuple[str, str], new: tuple[str, str], options: list[str], last: bool = False
) -> tuple[list[Edit], int]:
    chosen, kept = conclusion(text, old, options, last)
    edits = []
    for m in chosen:
        found = text[m.start : m.end]
        if m.letter:
            edits.append(Edit(m.start, m.end, new[0] if found.isupper() else new[0].lower()))
        else:
            edits.append(Edit(m.start, m.end, _match_case(found, new[1])))
    return edits, kept


def swap_choice(
    text: str, old: tuple[str, str], new: tuple[str, str], options: list[str]
) -> tuple[str, int]:
    """``text`` with the concluding mentions of (letter, option text) ``old`` swapped
    for ``new``, and the number of places changed."""
    edits, _ = _edits(text, old, new, options)
    return splice(text, edits), len(edits)


def inject_choice(answer: str, gold: str, options: list[str], seed: int) -> Injection:
    """Swap the chosen option for another wrong one where the answer concludes it; see
    the module doc."""
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
    edits, kept = _edits(answer, old, new, options)
    text = splice(answer, edits)
    if extract_letter(text, options, letters) != injected:  # read elsewhere: there too
        edits, kept = _edits(answer, old, new, options, last=True)
        text = splice(answer, edits)
    if not edits or extract_letter(text, options, letters) != injected:
        return Injection(answer, original, injected, reason="the scorer would not read it back")
    changes = tuple(Change(e.start, e.end, answer[e.start : e.end], e.text) for e in edits)
    return Injection(text, original, injected, len(edits), None, changes, kept)
