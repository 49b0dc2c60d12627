"""How a learned judge is validated: folds that respect contexts, and the strata it is read by.

One module, so the shipped card, the re-fit and the bench cannot drift apart:

- **Groups.** Several reference turns answer the same conversation (3 per context in
  ``judge_realistic.jsonl``; 350 of the 477 small-model rows share one; a truncated and an
  untruncated answer to one item share its request). A fold that puts one of them in
  training and another in test lets the model recognise the context instead of reading
  the turn. The group is the conversation's first user message, whitespace-normalised,
  so every variant of one item falls in the same fold, across files too.
- **Splits.** Grouped, stratified K-fold (``folds``); leave one value of a row field out
  (``leave_one_out``, e.g. ``dataset``); transfer between reference files (``transfer``).
- **Style.** Where a turn came from, as a stratum: ``model_output`` (a real model wrote
  it), ``real_human`` (a person typed it), and, for turns written to imitate one or the
  other (``origin == "written"``, no style field in the file), ``written_model_like`` or
  ``written_human_like`` from ``written_style``: surface marks of each, checked by
  reading the turns (see the function).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

Split = tuple[np.ndarray, np.ndarray]
FOLDS = 5
SEED = 0
STYLES = ("model_output", "real_human", "written_model_like", "written_human_like")
SMALL_MODEL_FILES = ("judge_train.jsonl", "judge_dev.jsonl")
REALISTIC_FILE = "judge_realistic.jsonl"
HUMAN_FILE = "judge_human.jsonl"
"""Real next turns people typed (ShareGPT, HealthBench), labelled by this project; the
first three files are the shared reference sets, copied into the package."""
HELDOUT_FILE = "judge_human_heldout.jsonl"
"""More real next turns, labelled the same way and never fit on: the offline judge's
held-back check on people's own turns (its card and ``bench/judge_offline.py``)."""
FIT_FILES = (*SMALL_MODEL_FILES, REALISTIC_FILE, HUMAN_FILE)
"""What the offline judge is fit and cross-validated on."""
REFERENCE_FILES = (*FIT_FILES, HELDOUT_FILE)
"""Every shipped reference set (``--ref builtin``)."""
HUMAN_FILES = (HUMAN_FILE, HELDOUT_FILE)


def context_group(messages: Sequence[Any]) -> str:
    """The conversation a turn answers: a digest of its first user message."""
    first = next(
        (
            str(m.get("content", ""))
            for m in messages
            if isinstance(m, dict) and m.get("role") == "user"
        ),
        "",
    )
    text = " ".join(first.split()).lower()
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def groups(rows: Sequence[dict[str, Any]]) -> np.ndarray:
    return np.array([context_group(r["messages"]) for r in rows])


def folds(
    rows: Sequence[dict[str, Any]], genuine: np.ndarray, k: int = FOLDS, seed: int = SEED
) -> list[Split]:
    """Grouped, σ-stratified K-fold: no context in two folds."""
    # imported here: scikit-learn costs every CLI start about a second, and the CLI reads
    # cards (which use this module's style strata) without ever making folds
    from sklearn.model_selection import StratifiedGroupKFold

    split = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed)
    return list(split.split(np.zeros(len(rows)), genuine, groups(rows)))


def leave_one_out(values: np.ndarray) -> Iterator[Split]:
    """One split per distinct value: train on the others, test on it."""
    for g in sorted(set(values.tolist())):
        yield np.flatnonzero(values != g), np.flatnonzero(values == g)


def transfer(files: np.ndarray) -> dict[str, Split]:
    """Small-model files -> realistic, realistic -> small-model files, and every written
    or model-made turn -> the real human turns (what a judge with no human labels does)."""
    small = np.isin(files, SMALL_MODEL_FILES)
    real = files == REALISTIC_FILE
    human = files == HUMAN_FILE
    out = {
        "small_to_realistic": (np.flatnonzero(small), np.flatnonzero(real)),
        "realistic_to_small": (np.flatnonzero(real), np.flatnonzero(small)),
    }
    if human.any():
        out["others_to_human"] = (np.flatnonzero(~human), np.flatnonzero(human))
    return out


MODEL_MARKS = re.compile(
    r"<\|?[a-z_]+\|?>|\[/?INST\]|</?s>|<start_of_turn>|<think>|^\s*(assistant|analysis)\b"
    r"|^\s*(here'?s|here is|let me|let's|we need|the user|okay, so|alright|sure|certainly"
    r"|to (solve|answer|determine)|first,|step 1|thinking process|i need to|i should)\b"
    r"|\*\*|^\s*#{1,4} |^\s*(\d+\.|[-*]) \S",
    re.IGNORECASE | re.MULTILINE,
)
"""What models write under the user header: template tokens, planning and offer openers,
markdown structure."""
HUMAN_MARKS = re.compile(
    r"\b(i|im|ive|id|dont|doesnt|didnt|cant|wont|wouldnt|isnt|thats|whats|u|ur|pls|plz|thx"
    r"|ty|lol|idk|btw|gonna|wanna|kinda|yeah|yep|nah|hmm+|ok)\b|[?!]{2,}|\.\.\.",
)
"""What people type: lower-case "i", dropped apostrophes, chat shorthand, doubled marks.
Matched case-sensitively, so a sentence-initial "I" or "Ok" does not count."""
LONG_WORDS = 80


def written_style(turn: str, messages: Sequence[Any]) -> str:
    """``written_model_like`` or ``written_human_like`` for a turn written to a style.

    Model-like: a model mark (``MODEL_MARKS``), more than ``LONG_WORDS`` words, or a
    verbatim copy of a message already in the conversation (models echo; people rarely
    paste back a whole message). Human-like otherwise when the turn starts lower-case,
    carries a human mark (``HUMAN_MARKS``), or is short and ends without punctuation.
    Polished prose with none of these marks reads as model-like: it is the register
    models use when they play the user. Reading the 630 realistic turns against this
    assignment, the turns it calls human-like read as typed by a person.
    """
    text = turn.strip()
    norm = " ".join(text.split()).lower()
    copies = norm and any(
        norm in " ".join(str(m.get("content", "")).split()).lower()
        for m in messages
        if isinstance(m, dict) and len(norm) >= 40
    )
    if not text or MODEL_MARKS.search(text) or len(text.split()) > LONG_WORDS or copies:
        return "written_model_like"
    unpunctuated = text[-1] not in ".?!)\"'" and len(text.split()) <= 40
    if text[0].islower() or HUMAN_MARKS.search(text) or unpunctuated:
        return "written_human_like"
    return "written_model_like"


def style(row: dict[str, Any]) -> str:
    """The row's style stratum (``STYLES``), from its ``origin`` and, if written, its text."""
    origin = str(row.get("origin", ""))
    if origin == "written":
        return written_style(str(row["user_turn"]), row["messages"])
    if origin == "human" or row.get("model") == "human":
        return "real_human"
    return "model_output"


def styles(rows: Sequence[dict[str, Any]]) -> np.ndarray:
    return np.array([style(r) for r in rows])
