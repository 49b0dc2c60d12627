"""GSM8K-style numeric scoring: extract the final number robustly, compare numerically.

Order of evidence, strongest first, and the last match of the strongest kind wins:
``#### n`` (GSM8K's own format), ``\\boxed{...}`` (the number inside, LaTeX cleaned),
"the answer is n" / "answer: n" / "final answer = n", then the last number in the text.
Small models restate the question's numbers and reason before answering, so "last
number" is the fallback, not the rule. Numbers may carry ``$``, thousands commas, a
trailing period, a sign (ASCII or U+2212), decimals, ``%`` or a unit word after them.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_NUM = r"[-+]?(?:\$\s?)?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+"
_NUM_RE = re.compile(r"(?<![\w.])(" + _NUM + r")(?!\d)")
_HASHES = re.compile(r"####\s*\**\s*(" + _NUM + ")")
_ANSWER = re.compile(
    r"(?i:\b(?:final answer|answer|result)\b[*\s]*(?:is|was|:|=|would be|will be)"
    r"(?:\s*(?:approximately|about|exactly|equal to|therefore|then))?)[\s:=*$\\(]*(" + _NUM + r")"
)
_FRAC = re.compile(r"\\[dt]?frac\{\s*(-?\d+)\s*\}\{\s*(\d+)\s*\}")
_CLEAN = (
    (re.compile(r"\{,\}"), ","),
    (re.compile(r"\\[,!;: ]"), ""),
    (re.compile(r"\\\$"), "$"),
    (re.compile("[\u2212\u2013]"), "-"),
    (re.compile(r"(?<=\d)[\u00a0\u202f\u2009](?=\d{3}\b)"), ""),
)


def _clean(text: str) -> str:
    for pat, rep in _CLEAN:
        text = pat.sub(rep, text)
    return text


def _to_decimal(raw: str) -> Decimal | None:
    cleaned = re.sub(r"[\s,$+]", "", raw)
    try:
        return Decimal(cleaned)
    except InvalidOperation:
        return None


def boxed_contents(text: str) -> list[str]:
    """The contents of every ``\\boxed{...}``, with nested braces balanced."""
    out = []
    for m in re.finditer(r"\\boxed\s*\{", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            out.append(text[m.end() : i - 1])
    return out


def _from_boxed(content: str) -> Decimal | None:
    """``\\boxed{18}``, ``{\\$18}``, ``{18 \\text{ eggs}}``, ``{\\frac{3}{4}}``,
    ``{2 \\times 9 = 18}`` (what follows the last ``=``)."""
    content = content.rsplit("=", 1)[-1]
    frac = _FRAC.search(content)
    if frac:
        return Decimal(frac.group(1)) / Decimal(frac.group(2))
    hits = _NUM_RE.findall(content)
    return _to_decimal(hits[0]) if hits else None


def extract_number(text: str) -> Decimal | None:
    """The final numeric answer in ``text``, or None when there is no number at all."""
    text = _clean(text)
    hashes = _HASHES.findall(text)
    if hashes:
        return _to_decimal(hashes[-1])
    boxed = [v for c in boxed_contents(text) if (v := _from_boxed(c)) is not None]
    if boxed:
        return boxed[-1]
    stated = _ANSWER.findall(text)
    if stated:
        return _to_decimal(stated[-1])
    hits = _NUM_RE.findall(text)
    return _to_decimal(hits[-1]) if hits else None


def gold_number(answer: str) -> Decimal:
    """GSM8K gold answers end with ``#### n``."""
    value = extract_number(answer)
    if value is None:
        raise ValueError(f"no number in gold answer {answer!r}")
    return value


def score_numeric(prediction: str, gold: str) -> dict[str, object]:
    pred = extract_number(prediction)
    target = gold_number(gold)
    return {
        "correct": pred is not None and pred == target,
        "extracted": None if pred is None else str(pred),
        "gold": str(target),
    }
