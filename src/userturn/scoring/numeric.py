"""GSM8K-style numeric scoring: extract the final number robustly, compare numerically.

Order of evidence, strongest first: ``#### n`` (GSM8K's own format), ``\\boxed{n}``,
"the answer is n" / "answer: n", then the last number in the text. Small models often
restate the question's numbers before the result, so "last number" is the fallback, not
the rule.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_NUM = r"-?\$?\s?\d[\d,]*(?:\.\d+)?|-?\.\d+"
_PATTERNS = (
    re.compile(r"####\s*(" + _NUM + ")"),
    re.compile(r"\\boxed\{\s*\\?\$?\s*(" + _NUM + r")\s*(?:\\%|%)?\s*\}"),
    re.compile(r"(?:final answer|the answer|answer)\s*(?:is|:|=)?\s*[:=]?\s*\**\s*("
               + _NUM + ")", re.IGNORECASE),
)
_ANY = re.compile(_NUM)


def _to_decimal(raw: str) -> Decimal | None:
    cleaned = raw.replace(",", "").replace("$", "").replace(" ", "")
    try:
        return Decimal(cleaned)
    except InvalidOperation:
        return None


def extract_number(text: str) -> Decimal | None:
    """The final numeric answer in ``text``, or None when there is no number at all."""
    for pat in _PATTERNS:
        hits = pat.findall(text)
        if hits:
            return _to_decimal(hits[-1])
    hits = _ANY.findall(text)
    return _to_decimal(hits[-1]) if hits else None


def gold_number(answer: str) -> Decimal:
    """GSM8K gold answers end with ``#### n``."""
    value = extract_number(answer.split("####")[-1]) if "####" in answer else None
    if value is None:
        value = extract_number(answer)
    if value is None:
        raise ValueError(f"no number in gold answer {answer!r}")
    return value


def score_numeric(prediction: str, gold: str) -> dict[str, object]:
    pred = extract_number(prediction)
    target = gold_number(gold)
    return {"correct": pred is not None and pred == target,
            "extracted": None if pred is None else str(pred), "gold": str(target)}
