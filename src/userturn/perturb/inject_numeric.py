"""The numeric half of ``inject-error``: another final number, written where the answer
states its result, in each place's own format.

Only the conclusion changes: the line (or sentence) that computes the final number, and
the statements of it after that (``So she makes $18.``, ``#### 18``). On the computing
line only the result after ``=`` changes, never an operand. Everything before it stays:
premises quoted from the question ("Janet has 18 eggs") and intermediate values, even when
they equal the final number, so the injected answer reads as a plausible slip ("9 x 2 =
17") instead of contradicting its own premises. ``final_occurrences`` finds the places;
every change is recorded (``Change``: where, what was there, what was written).

The number changed is the one the scorer reads (``scoring.numeric.extract_number``), so
the injected answer is exactly as wrong as the score says. Each occurrence keeps its own
style: sign, ``$`` (or LaTeX ``\\$``), thousands separators (``,``, ``{,}`` or a thin
space) and decimal places. Only whole number tokens change (18 never inside 180, 1.8 or
2,018), and enumeration labels ("Step 2", a line starting "2.") are left alone: they
number the steps, they don't state the answer.

The wrong value is drawn from the seed among plausible slips of the same magnitude:
the original plus or minus 1 to 9 units, a unit being one in the second significant
digit (18 -> 10..27, 694 -> 604..784 in tens, 0.75 -> 0.15..0.95 in tenths), never below
the decimal places the answer uses, never changing sign or digit count when avoidable,
and never equal to the gold or to the original.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from decimal import Decimal

from userturn.perturb.splice import Edit, splice
from userturn.scoring.numeric import extract_number

_SEP = r"(?:,|\{,\}|[\u00a0\u202f\u2009])"
_TOKEN = re.compile(
    r"(?<![\w.])(?<!\d,)(?P<sign>[-+\u2212]?)(?P<cur>\\?\$\s?)?"
    rf"(?P<int>\d{{1,3}}(?:{_SEP}\d{{3}})+|\d+)(?P<frac>\.\d+)?(?!\d|[.,]\d)"
)
"""A number token as ``scoring.numeric`` reads one, on the raw (uncleaned) text, except
that a number touching another through a comma or point ("3,5" with a decimal comma)
is part of that number, not a token of its own."""
_STEP_WORD = re.compile(r"(?i:\b(?:step|part|case|stage)\s*#?)$")
_LABEL_AFTER = re.compile(r"[.)][ \t]+\S")
"""After an enumeration number: "2. Compute" or "2) Compute" (not a bare "18.")."""


_SEGMENT_END = re.compile(r"\n|(?<=[.!?:])[ \t]+(?=[A-Z#\\*])")
"""Where a statement ends: a newline, or a sentence end before a capital, ``#`` or ``\\``."""


@dataclass(frozen=True)
class Change:
    """One place an injection rewrote: the span in the original text, and both texts."""

    start: int
    end: int
    old: str
    new: str


@dataclass(frozen=True)
class Injection:
    """What one injection did; ``reason`` is set (and ``text`` unchanged) when it couldn't."""

    text: str
    original: str | None = None
    injected: str | None = None
    occurrences: int = 0
    reason: str | None = None
    changes: tuple[Change, ...] = ()
    kept: int = 0
    """Places that state the original value before the conclusion, left as they were."""


def _value(m: re.Match[str]) -> Decimal:
    sign = "-" if m["sign"] in ("-", "\u2212") else ""
    return Decimal(sign + re.sub(r"\D", "", m["int"]) + (m["frac"] or ""))


def _is_label(text: str, m: re.Match[str]) -> bool:
    """A step number: "Step 2", "Part 2:", or a line that starts "2. ..." / "2) ..."."""
    if _STEP_WORD.search(text[max(0, m.start() - 12) : m.start()]):
        return True
    line = text[text.rfind("\n", 0, m.start()) + 1 : m.start()]
    starts_line = not line.strip(" \t>*") and not m["sign"] and not m["cur"]
    return starts_line and bool(_LABEL_AFTER.match(text, m.end()))


def occurrences(text: str, value: Decimal) -> list[re.Match[str]]:
    """Every whole number token in ``text`` whose value is ``value`` (labels excluded)."""
    return [m for m in _TOKEN.finditer(text) if _value(m) == value and not _is_label(text, m)]


def render(m: re.Match[str], value: Decimal) -> str:
    """``value`` written in the style of the token ``m``: sign, currency, separators,
    decimal places (more places only when ``value`` needs them)."""
    places = len(m["frac"] or "") - 1 if m["frac"] else 0
    needed = max(0, -int(value.normalize().as_tuple().exponent))
    digits = f"{abs(value):.{max(places, needed)}f}"
    whole, _, frac = digits.partition(".")
    sep = re.search(_SEP, m["int"])
    if sep:
        whole = f"{int(whole):,}".replace(",", sep.group(0))
    return m["sign"] + (m["cur"] or "") + whole + (f".{frac}" if frac else "")


def _unit(value: Decimal) -> Decimal:
    """One in the second significant digit (1 for one-digit numbers)."""
    if value == 0:
        return Decimal(1)
    exp = value.adjusted()
    return Decimal(1).scaleb(exp - 1 if exp >= 1 else exp)


def _same_sign(value: Decimal, original: Decimal) -> bool:
    return value < 0 if original < 0 else value > 0


def wrong_values(original: Decimal, gold: Decimal) -> list[Decimal]:
    """Plausible wrong values, sorted: ±1..9 units, same sign and digit count when any
    such value exists, never the original or the gold."""
    step = Decimal(1).scaleb(min(0, int(original.as_tuple().exponent)))
    unit = max(_unit(original), step)
    raw = {(original + sign * k * unit).quantize(step) for sign in (1, -1) for k in range(1, 10)}
    ok = [v for v in raw if v != original and v != gold]
    signed = [v for v in ok if _same_sign(v, original)]
    sized = [v for v in signed if original == 0 or v.adjusted() == original.adjusted()]
    return sorted(sized or signed or ok)


def _segments(text: str) -> list[tuple[int, int]]:
    """The text's statements as spans: lines, split again at sentence ends."""
    spans, pos = [], 0
    for m in _SEGMENT_END.finditer(text):
        spans.append((pos, m.start()))
        pos = m.end()
    spans.append((pos, len(text)))
    return [(lo, hi) for lo, hi in spans if hi > lo]


def final_occurrences(text: str, value: Decimal) -> list[re.Match[str]]:
    """The places that state ``value`` as the answer's result: the result (after ``=``)
    of the last statement that computes with other numbers, and every statement of
    ``value`` after it. Earlier mentions are premises or intermediate values. An answer
    with no other number computes nothing: there every mention is the result."""
    found = occurrences(text, value)
    if not found:
        return []
    others = [m for m in _TOKEN.finditer(text) if _value(m) != value and not _is_label(text, m)]
    last = found[-1].start()
    working = [lo for lo, hi in _segments(text) if any(lo <= m.start() < hi for m in others)]
    working = [lo for lo in working if lo <= last]
    if not working:  # no computation at all: every mention states the result
        return found
    lo = working[-1]
    hi = _segment_of(text, lo)[1]
    computed = [m for m in found if lo <= m.start() < hi and "=" in text[lo : m.start()]]
    return computed + [m for m in found if m.start() >= hi]


def _segment_of(text: str, pos: int) -> tuple[int, int]:
    return next((lo, hi) for lo, hi in _segments(text) if lo <= pos < hi)


def swap_number(text: str, original: Decimal, injected: Decimal) -> tuple[str, int]:
    """``text`` with the stated result ``original`` (``final_occurrences``) written as
    ``injected`` in its own format, and the number of places changed."""
    text2, changes, _ = swap_final(text, original, injected)
    return text2, len(changes)


def swap_final(
    text: str, original: Decimal, injected: Decimal
) -> tuple[str, tuple[Change, ...], int]:
    """The swap, its changes, and how many earlier mentions of ``original`` were kept."""
    chosen = final_occurrences(text, original)
    edits = [Edit(m.start(), m.end(), render(m, injected)) for m in chosen]
    changes = tuple(Change(e.start, e.end, text[e.start : e.end], e.text) for e in edits)
    kept = len(occurrences(text, original)) - len(edits)
    return splice(text, edits), changes, kept


def inject_number(answer: str, gold: Decimal, seed: int) -> Injection:
    """Replace the answer's final number where it states its result; see the module doc."""
    original = extract_number(answer)
    if original is None:
        return Injection(answer, reason="the answer states no number")
    if abs(original.adjusted()) > 15:
        return Injection(answer, str(original), reason="the final number is out of range")
    injected = random.Random(seed).choice(wrong_values(original, gold))
    text, changes, kept = swap_final(answer, original, injected)
    if not changes and occurrences(answer, original):
        why = "the final number is only a premise or an intermediate value, never a result"
        return Injection(answer, str(original), reason=why)
    if not changes:
        return Injection(answer, str(original), reason="the final number is not a plain token")
    if extract_number(text) != injected:
        return Injection(
            answer, str(original), str(injected), reason="the scorer would not read it back"
        )
    return Injection(text, str(original), str(injected), len(changes), None, changes, kept)
