"""Lenient parsing of a judge's reply into (genuine, label, rationale), or a reason why not.

Small and unconstrained models wrap JSON in prose or code fences, use ``"yes"`` for
``true``, write ``"Plausible follow-up"`` for ``plausible_followup``, or get cut off in
the rationale. We accept those, because the verdict is unambiguous. We never guess: a
reply without a recognisable verdict, or with a label that is not on the menu, is a
``ParseFailure`` (which the judge turns into ``status="unparseable"``), never "not
genuine".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from userturn.types import LABELS, Label

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)
_GENUINE = re.compile(r'"?genuine_follow_?up"?\s*[:=]\s*"?(true|false|yes|no)\b', re.I)
_LABEL = re.compile(r'"?label"?\s*[:=]\s*"([^"\n]{1,60})"?', re.I)
_RATIONALE = re.compile(r'"?rationale"?\s*[:=]\s*"((?:[^"\\]|\\.)*)', re.S | re.I)
_TRUE = {"true", "yes", "1"}
_FALSE = {"false", "no", "0"}
DEGENERATE = frozenset(LABELS) - {"plausible_followup", "other"}


@dataclass(frozen=True)
class Verdict:
    genuine: bool
    label: Label
    rationale: str
    notes: tuple[str, ...] = field(default=())
    """What leniency was needed (e.g. ``"regex"``, ``"genuine from label"``)."""


@dataclass(frozen=True)
class ParseFailure:
    reason: str


def normalize_label(raw: object) -> Label | None:
    """``"Plausible follow-up"`` -> ``plausible_followup``; None if not on the menu."""
    if not isinstance(raw, str):
        return None
    key = re.sub(r"[\s\-]+", "_", raw.strip().strip("'\"`.").lower())
    key = key.replace("follow_up", "followup")
    for label in LABELS:
        if key == label:
            return label
    return None


def _bool(raw: object) -> bool | None:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str):
        low = raw.strip().lower()
        return True if low in _TRUE else False if low in _FALSE else None
    return None


def _objects(text: str) -> list[dict[str, Any]]:
    """Every JSON object that decodes from some ``{`` in the text, fences first."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    found = []
    for chunk in candidates:
        for start in (i for i, ch in enumerate(chunk) if ch == "{"):
            try:
                obj, _ = decoder.raw_decode(chunk, start)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                found.append(obj)
    return found


def _from_fields(
    genuine_raw: object, label_raw: object, rationale: object, notes: tuple[str, ...]
) -> Verdict | ParseFailure:
    label = normalize_label(label_raw)
    if label is None:
        what = "missing" if label_raw is None else f"not on the menu: {label_raw!r}"
        return ParseFailure(f"label {what}")
    genuine = _bool(genuine_raw)
    if genuine is None:
        if genuine_raw is not None or label == "other":
            return ParseFailure(f"genuine_followup is not a boolean: {genuine_raw!r}")
        genuine = label == "plausible_followup"  # the rubric defines σ by these labels
        notes = (*notes, "genuine from label")
    elif genuine != (label == "plausible_followup") and label != "other":
        notes = (*notes, "genuine and label disagree")  # kept as given: σ is primary
    return Verdict(genuine, label, str(rationale or "").strip(), notes)


def parse_verdict(text: str | None) -> Verdict | ParseFailure:
    """Parse a reply; JSON objects first, then key-value patterns in free text."""
    if not text or not text.strip():
        return ParseFailure("empty reply")
    for obj in _objects(text):
        if "label" in obj or "genuine_followup" in obj:
            return _from_fields(
                obj.get("genuine_followup"), obj.get("label"), obj.get("rationale"), ()
            )
    label = _LABEL.search(text)
    genuine = _GENUINE.search(text)
    if label is None and genuine is None:
        return ParseFailure("no JSON object and no verdict keys")
    rationale = _RATIONALE.search(text)
    why = rationale.group(1).replace('\\"', '"') if rationale else ""
    return _from_fields(
        genuine.group(1) if genuine else None, label.group(1) if label else None, why, ("regex",)
    )
