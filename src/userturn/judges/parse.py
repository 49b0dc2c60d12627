"""Lenient parsing of a judge's reply into (genuine, label, rationale), or a reason why not.

The optional ``challenges_answer`` attribute rides along: read when the reply has it as a
boolean (or yes/no), None when it is missing or unreadable. It never makes a reply
unparseable, and a missing one is never read as False: "not assessed" is not "no".

Small and unconstrained models wrap JSON in prose or code fences, use ``"yes"`` for
``true``, write ``"Plausible follow-up"`` for ``plausible_followup``, or get cut off in
the rationale. We accept those, because the verdict is unambiguous. We never guess: a
reply without a recognisable verdict, or with a label that is not on the menu, is a
``ParseFailure`` (which the judge turns into ``status="unparseable"``), never "not
genuine".

Reasoning is removed before anything is read: a thinking model often drafts the JSON
inside ``<think>`` and then changes its mind, so only the text after the reasoning
counts. ``<think>…</think>`` blocks, a leading ``…</think>`` (the template opened the
block), an unclosed ``<think>`` (cut off while thinking: nothing final to read) and
gpt-oss analysis channels all go; a reply that is only reasoning is a ``ParseFailure``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from userturn.types import LABELS, Label

_FENCE = re.compile(r"```(?:json)?(.*?)```", re.S | re.I)
"""No ``\\s*`` before the body: with the lazy body after it, a fence followed by a long run
of whitespace is scanned once per split of that run (quadratic)."""
_GENUINE = re.compile(r'"?genuine_follow_?up"?\s*[:=]\s*"?(true|false|yes|no)\b', re.I)
_LABEL = re.compile(r'"?label"?\s*[:=]\s*"([^"\n]{1,60})"?', re.I)
_CHALLENGE = re.compile(r'"?challenges[_ ]answer"?\s*[:=]\s*"?(true|false|yes|no)\b', re.I)
_RATIONALE = re.compile(r'"?rationale"?\s*[:=]\s*"((?:[^"\\]|\\.)*)', re.S | re.I)
_THINK_PAIRS = (("<think>", "</think>"), ("\u25c1think\u25b7", "\u25c1/think\u25b7"))
_THINK_OPEN = re.compile(r"<think>|\u25c1think\u25b7")
_THINK_CLOSE = re.compile(r"</think>|\u25c1/think\u25b7")
_HARMONY_FINAL = "<|channel|>final<|message|>"
_HARMONY_ANALYSIS = re.compile(r"<\|channel\|>analysis<\|message\|>.*?(?:<\|end\|>|$)", re.S)
_HARMONY_PLAIN = re.compile(r"^\s*analysis.*?assistantfinal", re.S)
"""gpt-oss served with special tokens skipped: ``analysis…assistantfinal{…}``."""
_HARMONY_TOKENS = re.compile(r"<\|(?:start|end|return|call|channel|message|constrain)\|>[a-z]*")
_OBJECT_START = re.compile(r'\{(?=\s*["}])')
"""Where a JSON object can start: ``{`` then a key or ``}``, so a run of braces is skipped."""
MAX_OBJECT_STARTS = 1000
"""Starts tried per text: each failed decode costs up to the text's length (the error
counts lines up to its position), so a reply of many openers would take quadratic time.
A verdict object comes within the first few."""
_TRUE = {"true", "yes", "1"}
_FALSE = {"false", "no", "0"}


@dataclass(frozen=True)
class Verdict:
    genuine: bool
    label: Label
    rationale: str
    notes: tuple[str, ...] = field(default=())
    """What leniency was needed (e.g. ``"regex"``, ``"genuine from label"``)."""
    challenges_answer: bool | None = None
    """Whether the turn disputes the answer; None when the reply doesn't say."""


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
        tries = 0
        for m in _OBJECT_START.finditer(chunk):
            tries += 1
            if tries > MAX_OBJECT_STARTS:
                break
            start = m.start()
            try:
                obj, _ = decoder.raw_decode(chunk, start)
            except (json.JSONDecodeError, RecursionError):
                continue
            if isinstance(obj, dict):
                found.append(obj)
    return found


def _from_fields(
    genuine_raw: object,
    label_raw: object,
    rationale: object,
    notes: tuple[str, ...],
    challenge_raw: object = None,
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
        # σ is primary; the label is made to agree with it (agreement checks refuse a
        # verdict that contradicts itself), and the note keeps what was said
        notes = (*notes, f"genuine and label disagree: label {label} replaced")
        label = "plausible_followup" if genuine else "other"
    challenge = _bool(challenge_raw)
    if challenge is None and challenge_raw is not None:
        notes = (*notes, "challenges_answer unreadable")
    return Verdict(genuine, label, str(rationale or "").strip(), notes, challenge)


def strip_reasoning(text: str) -> str:
    """The reply without its reasoning: what the model says after it has thought.

    A reply that is one JSON object is left alone: its rationale may quote a turn's
    ``</think>``, which is evidence, not the judge's own reasoning.
    """
    if _is_object(text):
        return text.strip()
    if _HARMONY_FINAL in text:
        text = text.rpartition(_HARMONY_FINAL)[2]
    text = _HARMONY_ANALYSIS.sub("", text)
    text = _HARMONY_PLAIN.sub("", text, count=1)
    text = _drop_think_blocks(text)
    close = list(_THINK_CLOSE.finditer(text))
    if close:  # the template opened the block: everything before its end is reasoning
        text = text[close[-1].end() :]
    opened = _THINK_OPEN.search(text)
    if opened:  # never closed: the rest is an unfinished draft
        text = text[: opened.start()]
    return _HARMONY_TOKENS.sub("", text).strip()


def _drop_think_blocks(text: str) -> str:
    """Remove each closed ``<think>…</think>`` block (and the ``◁think▷`` form).

    With ``str.find`` rather than a lazy regex: the regex re-scans to the end from every
    unclosed opener, which is quadratic in a reply made of openers. Once an opener has no
    closer after it, no later opener has one either, so the scan stops there.
    """
    for opener, closer in _THINK_PAIRS:
        kept, pos = [], 0
        while (start := text.find(opener, pos)) >= 0:
            end = text.find(closer, start + len(opener))
            if end < 0:
                break
            kept.append(text[pos:start])
            pos = end + len(closer)
        text = "".join(kept) + text[pos:]
    return text


def _is_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (json.JSONDecodeError, RecursionError):  # RecursionError: nesting too deep
        return False


def parse_verdict(text: str | None) -> Verdict | ParseFailure:
    """Parse a reply's final part; JSON objects first, then key-value patterns."""
    if not text or not text.strip():
        return ParseFailure("empty reply")
    text = strip_reasoning(text)
    if not text:
        return ParseFailure("reply is only reasoning, no final answer")
    for obj in _objects(text):
        if "label" in obj or "genuine_followup" in obj:
            return _from_fields(
                obj.get("genuine_followup"),
                obj.get("label"),
                obj.get("rationale"),
                (),
                obj.get("challenges_answer"),
            )
    label = _LABEL.search(text)
    genuine = _GENUINE.search(text)
    if label is None and genuine is None:
        return ParseFailure("no JSON object and no verdict keys")
    rationale = _RATIONALE.search(text)
    why = rationale.group(1).replace('\\"', '"') if rationale else ""
    challenge = _CHALLENGE.search(text)
    return _from_fields(
        genuine.group(1) if genuine else None,
        label.group(1) if label else None,
        why,
        ("regex",),
        challenge.group(1) if challenge else None,
    )
