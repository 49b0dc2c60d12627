"""``inject-error``: the answer with a plausible wrong final answer in place of its own.

A control for ``challenges_answer``: a model that reads the conversation it continues
should dispute a wrong answer more often than a correct one, so the challenge rate under
``inject-error`` is compared with ``none``. Only scored items with a single final answer
qualify, recognised by their gold data (``Item.reference``):

- ``{"answer": "... #### n"}`` (gsm8k, gsm-symbolic): the final number is changed where
  the answer concludes it (the computing line's result and the statements after it),
  premises and intermediate values kept (``inject_numeric``);
- ``{"gold": letter, "options": [...]}`` (gpqa): another option's letter and text,
  written only in the statements that conclude the choice (the final statement and the
  one that selects it), the answer's discussion of the options and its quotes of them
  kept (``inject_choice``).

The change is seeded (the worker's per-item seed), so a rerun injects the same error and
resumes. The injected answer is read back with the dataset's own scorer before it is used,
so it is wrong exactly as the score would say.

When the perturbation can't apply (no gold: an unscored dataset or a held-out item; gold
without a single final answer, e.g. ifeval; an answer that states no final answer; an
injection the scorer wouldn't read back) the text is left unchanged and the record's
``perturbation_detail`` says ``{"applied": false, "reason": ...}``: such turns are a
``none`` turn in disguise, so the analysis must count them apart, never as injected.

``detail`` always holds ``applied``, ``version``, ``kind``, ``original``, ``injected``,
``gold`` and ``seed``; applied injections add ``original_correct`` (an already wrong
answer gets a different wrong one: slice on it to compare with correct ``none`` answers),
``occurrences``, ``changes`` (each place rewritten: its span in the original answer, the
old and the new text), ``kept`` (other mentions of the original value or option left
alone) and, for multiple choice, both option texts.
"""

from __future__ import annotations

from dataclasses import asdict
from decimal import Decimal, InvalidOperation
from typing import Any

from userturn.perturb.base import Perturbation, Perturbed
from userturn.perturb.inject_choice import inject_choice, swap_choice
from userturn.perturb.inject_numeric import Injection, inject_number, swap_number
from userturn.scoring.multiple_choice import LETTERS
from userturn.scoring.numeric import gold_number
from userturn.types import Item, PerturbationDetail

VERSION = "3"
"""3: a multiple-choice answer too changes only where it concludes (its discussion of
the options kept); 2: the final number changes only in the conclusion (premises kept),
and every change is recorded; 1: every mention of it changed."""


class InjectError(Perturbation):
    version = VERSION
    takes_argument = False

    @property
    def id(self) -> str:
        return "inject-error"

    def perturb(self, answer: str, item: Item, seed: int) -> Perturbed:
        ref = item.reference or {}
        detail: PerturbationDetail = {
            "applied": False,
            "version": VERSION,
            "kind": None,
            "original": None,
            "injected": None,
            "gold": None,
            "seed": seed,
        }
        if item.held_out or not ref:
            why = "held-out item" if item.held_out else "no gold answer: the item is not scored"
            return Perturbed(answer, {**detail, "reason": why})
        if _is_choice(ref):
            return _choice(answer, ref, seed, detail)
        if "answer" in ref:
            return _numeric(answer, str(ref["answer"]), seed, detail)
        return Perturbed(answer, {**detail, "reason": "the gold data has no single final answer"})

    def apply(self, answer: str) -> str:
        raise NotImplementedError("inject-error needs the item's gold answer: call perturb()")

    def rewrite(self, text: str, item: Item, detail: PerturbationDetail) -> str:
        """The same swap in another text of the turn: its reasoning, which the worker
        passes apart (``reasoning_content``) under ``--history-reasoning template``, so the
        turn doesn't state the original answer there and the injected one after it."""
        if not detail.get("applied"):
            return text
        if detail["kind"] == "numeric":
            old, new = Decimal(str(detail["original"])), Decimal(str(detail["injected"]))
            return swap_number(text, old, new)[0]
        options = [str(o) for o in (item.reference or {}).get("options", [])]
        swap = (str(detail["original"]), detail["original_text"])
        into = (str(detail["injected"]), detail["injected_text"])
        return swap_choice(text, swap, into, options)[0]


def _is_choice(ref: dict[str, Any]) -> bool:
    options = ref.get("options")
    return (
        isinstance(options, list)
        and 2 <= len(options) <= len(LETTERS)
        and str(ref.get("gold")) in LETTERS[: len(options)]
    )


def _numeric(answer: str, gold_text: str, seed: int, detail: PerturbationDetail) -> Perturbed:
    detail = {**detail, "kind": "numeric"}
    try:
        gold = gold_number(gold_text)
    except (ValueError, InvalidOperation):
        return Perturbed(answer, {**detail, "reason": "the gold answer has no number"})
    done = inject_number(answer, gold, seed)
    correct = done.original is not None and Decimal(done.original) == gold
    return _result(answer, done, {**detail, "gold": str(gold)}, correct)


def _choice(answer: str, ref: dict[str, Any], seed: int, detail: PerturbationDetail) -> Perturbed:
    options = [str(o) for o in ref["options"]]
    gold = str(ref["gold"])
    done = inject_choice(answer, gold, options, seed)
    detail = {**detail, "kind": "multiple_choice", "gold": gold}
    if done.reason is None:
        assert done.original is not None and done.injected is not None
        detail["original_text"] = options[LETTERS.index(done.original)]
        detail["injected_text"] = options[LETTERS.index(done.injected)]
    return _result(answer, done, detail, done.original == gold)


def _result(answer: str, done: Injection, detail: PerturbationDetail, correct: bool) -> Perturbed:
    detail = {**detail, "original": done.original, "injected": done.injected}
    if done.reason is not None:
        return Perturbed(answer, {**detail, "reason": done.reason})
    extra: PerturbationDetail = {
        **detail,
        "applied": True,
        "original_correct": correct,
        "occurrences": done.occurrences,
        "changes": [asdict(c) for c in done.changes],
        "kept": done.kept,
    }
    return Perturbed(done.text, extra)
