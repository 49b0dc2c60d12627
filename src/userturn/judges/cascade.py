"""Cascade judge: the offline judge settles the turns it is sure of, the LLM judge the rest.

Spec: ``cascade:<llm judge spec>``, e.g. ``cascade:openai:gpt-5.4-mini`` or
``cascade:llm:llamacpp:judge.gguf``. Why: many turns are easy (empty output, template
tokens, a verbatim copy of the prompt, a plainly grounded question), and paying an LLM
to say so is waste. The offline judge settles a turn without an LLM call in two ways
(``settle``):

1. **Evidence**: a degenerate verdict that an independent, stricter check confirms:

   - ``degenerate_short``: no word at all, or a bare reaction of one or two words
     (``REACTION``: "ok", "thx", "Great, thanks!") after an answer that asked the user
     nothing. Two words of content are often a person's genuine reply ("for ubuntu",
     "5 more", "Alexander Hanff" after "Can you provide more context about this
     person?"), so a short turn alone is no evidence;
   - ``malformed_artifact``: a chat-template or role token the context doesn't contain
     (special tokens, or a role header leaked as text such as ``ibleymodel`` on its own
     line);
   - ``previous_turn_restate`` / ``assistant_turn_restate``: at least 8 words, and at
     least 90% of the turn's word 4-grams occur in the user prompt / the assistant answer.

2. **Confidence**: the offline judge's calibrated P(genuine) is at most ``LO`` and its
   verdict is "not genuine" (the label is offline's), or at least ``HI`` and its verdict
   is "genuine". The low side is closed after an answer that asks the user for something
   or hands over a move (``offline_cues.asks_for_input``, ``invites_move``): the reply
   may hand over what was asked (a job description pasted in, a traceback, a chess
   move), which shares little with the answer, and offline's low P(genuine) there is
   often wrong. ``LO`` and ``HI`` were chosen on grouped out-of-fold probabilities of the
   1,314 reference turns (``bench/cascade_oof.py`` prints the choice; ``pick_bounds``
   makes it): the widest bounds whose settled turns, on each side, agree with the
   reference labels at least ``TARGET`` of the time, above the 90.5% at which the paper's
   LLM judge agrees with blinded people. The figures are in docs/judges.md: a settled
   verdict is more often right than that LLM judge is on average, though perhaps not
   than it is on these easy turns, and not on people's own turns.

Everything else goes to the LLM judge. ``calls_saved()`` counts the turns settled
without an LLM call. The version carries ``SETTLE_VERSION`` and the bounds, so verdicts
stored under an older settle rule are re-judged rather than mixed in.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np

from userturn.judges import load_judge, offline_cues
from userturn.judges.base import Judge
from userturn.judges.cache import JudgeCache
from userturn.judges.llm import LLMJudge, canonical_id
from userturn.spec import Spec
from userturn.types import JudgeInput, Judgment, Label

log = logging.getLogger(__name__)

_WORD = re.compile(r"\w+", re.UNICODE)
_TOKEN = re.compile(
    r"<\|[^|<>\s]{1,40}\|>|<(?:start|end)_of_turn>|\[/?INST\]|</s>"
    r"|(?m:^[ \t]*\S+?(?:user|model|assistant)[ \t]*$)"
)
"""Special tokens, and a role name glued to a junk token on its own line (``beliauuser``):
what a template's turn header looks like once its special tokens are gone."""
MIN_RESTATE_WORDS = 8
MIN_NGRAM_OVERLAP = 0.9
TARGET = 0.95
"""Agreement with the reference labels that the turns settled on each side must reach
(out-of-fold) for ``pick_bounds``: above the paper's LLM judge against people (90.5%)."""
LO = 0.07
"""Settle as not genuine at P(genuine) <= LO (``pick_bounds`` on the out-of-fold
probabilities of the 1,314 reference turns, 2026-12-03)."""
HI = 0.89
"""Settle as genuine at P(genuine) >= HI (chosen with ``LO``)."""
SETTLE_VERSION = "settle-3"
"""Bump when the settle rule changes (``settle-1``: evidence only; ``settle-2``: any turn
of at most two words was evidence, and the low side was open after every answer); the
bounds enter the cascade's version on their own."""
REACTION = re.compile(
    r"(?:ok(?:ay)?|k+|thanks|thx|ty|cool|nice|great|wow|lol|haha|yes|yeah|yep"
    r"|sure|fine|correct|good|awesome|perfect|yum|aww|nvm|alright|understood|noted"
    r"|obrigad[oa]|gracias|merci|danke|спасибо)",
    re.IGNORECASE,
)
"""A word that only reacts: acknowledgement, thanks, assent ("thank you" is folded to
"thanks" before matching)."""
GRID = np.round(np.arange(0.0, 1.0001, 0.01), 2)


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _ngrams(words: list[str], n: int = 4) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def _last(messages: tuple[dict[str, object], ...], role: str) -> str:
    for m in reversed(messages):
        if m.get("role") == role:
            return str(m.get("content") or "")
    return ""


def evidence(inp: JudgeInput, label: Label | None) -> str | None:
    """Why ``label`` is beyond doubt for this turn, or None if it isn't."""
    words = _words(inp.user_turn)
    if label == "degenerate_short":
        if not words:
            return "empty output"
        text = re.sub(r"\bthank you\b", "thanks", " ".join(words))
        bare = len(words) <= 2 and "?" not in inp.user_turn
        if bare and all(REACTION.fullmatch(w) for w in text.split()) and low_open(inp):
            return "a bare reaction"
        return None
    if label == "malformed_artifact":
        context = "\n".join(str(m.get("content") or "") for m in inp.messages)
        tokens = [t for t in _TOKEN.findall(inp.user_turn) if t not in context]
        return f"template token {tokens[0]!r}" if tokens else None
    if label in ("previous_turn_restate", "assistant_turn_restate"):
        if len(words) < MIN_RESTATE_WORDS:
            return None
        role = "user" if label == "previous_turn_restate" else "assistant"
        mine = _ngrams(words)
        source = _ngrams(_words(_last(inp.messages, role)))
        share = len(mine & source) / len(mine) if mine else 0.0
        return (
            f"{share:.0%} of word 4-grams copied from the {role}"
            if share >= MIN_NGRAM_OVERLAP
            else None
        )
    return None


def low_open(inp: JudgeInput) -> bool:
    """Whether the answer left the user nothing in particular to supply: after one that
    asks for details or hands over a move, a reply offline reads as empty or unrelated
    may be exactly what was asked, so only the LLM may call it not genuine."""
    answer = _last(inp.messages, "assistant")
    return not (offline_cues.asks_for_input(answer) or offline_cues.invites_move(answer))


@dataclass(frozen=True)
class Settled:
    """A verdict the cascade takes from the offline judge without asking the LLM."""

    genuine: bool
    label: Label
    why: str


def settle(inp: JudgeInput, verdict: Judgment, lo: float = LO, hi: float = HI) -> Settled | None:
    """The offline verdict, if the cascade may keep it (module docstring), else None.

    The one settle rule: the cascade applies it, and ``bench/cascade_oof.py`` and
    ``bench/cascade_dev.py`` measure it, so the figures are those of the shipped rule.
    """
    if verdict.status != "ok" or verdict.genuine is None or verdict.label is None:
        return None
    if verdict.genuine is False:
        why = evidence(inp, verdict.label)
        if why is not None:
            return Settled(False, verdict.label, why)
    p = verdict.probability
    if p is None:
        return None
    if verdict.genuine is False and p <= lo and low_open(inp):
        return Settled(False, verdict.label, f"P(genuine) {p:.2f} ≤ {lo:.2f}")
    if verdict.genuine is True and p >= hi:
        return Settled(True, verdict.label, f"P(genuine) {p:.2f} ≥ {hi:.2f}")
    return None


def pick_bounds(
    p: np.ndarray,
    said: np.ndarray,
    truth: np.ndarray,
    free: np.ndarray,
    target: float = TARGET,
    low_free: np.ndarray | None = None,
) -> tuple[float, float]:
    """``(LO, HI)``: the widest bounds on ``GRID`` whose settled turns reach ``target``.

    Args:
        p: P(genuine) per turn, out-of-fold (a turn's model never saw its conversation).
        said: the offline verdict per turn (True: genuine).
        truth: the reference label per turn.
        free: turns confidence may settle (an ok verdict the evidence path left open).
        target: the least share of each side's settled turns that must match ``truth``.
        low_free: turns the low side may settle (``free`` and ``low_open``); ``free``
            when None.

    Each side is held to ``target`` on its own, so a very accurate side cannot carry a
    weak one. A side with no admissible bound gets one no probability reaches (-1 or 2).
    """
    lo, hi = -1.0, 2.0
    low_free = free if low_free is None else low_free
    for t in GRID:
        low = low_free & ~said & (p <= t)
        if low.any() and np.mean(~truth[low]) >= target:
            lo = float(t)
        high = free & said & (p >= t)
        if high.any() and np.mean(truth[high]) >= target and hi > 1.0:
            hi = float(t)
    return lo, hi


class CascadeJudge(Judge):
    def __init__(
        self,
        spec: Spec,
        base_url: str | None = None,
        models: list[str] | None = None,
        cache: JudgeCache | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(spec)
        target = spec.target.removeprefix("llm:")
        self._id = canonical_id("cascade", target)
        self.offline = load_judge("offline")
        self.llm = LLMJudge(
            Spec("llm", target, raw=f"llm:{target}"), base_url=base_url, models=models, cache=cache
        )
        self.lo, self.hi = LO, HI
        settle_rule = f"{SETTLE_VERSION}({self.lo:g},{self.hi:g})"
        self.version = f"{self.offline.version}+{settle_rule}+{self.llm.version}"
        self._saved = 0

    @property
    def id(self) -> str:
        return self._id

    def judge(self, inputs: list[JudgeInput]) -> list[Judgment]:
        out: list[Judgment | None] = [None] * len(inputs)
        for i, verdict in self.judge_each(inputs):
            out[i] = verdict
        return [j for j in out if j is not None]

    def judge_each(self, inputs: list[JudgeInput]) -> Iterator[tuple[int, Judgment]]:
        """The offline-settled turns at once, then the LLM's verdicts as they return."""
        todo = []
        for i, (inp, verdict) in enumerate(zip(inputs, self.offline.judge(inputs), strict=True)):
            settled = settle(inp, verdict, self.lo, self.hi)
            if settled is None:
                todo.append(i)
                continue
            self._saved += 1
            yield (
                i,
                Judgment(
                    self.id,
                    settled.genuine,
                    settled.label,
                    f"offline ({settled.why}): {verdict.rationale}",
                    usage={"calls": 0, "settled_by": "offline"},
                    probability=verdict.probability,
                    challenges_answer=verdict.challenges_answer,
                ),
            )
        for j, v in self.llm.judge_each([inputs[i] for i in todo]):
            yield todo[j], replace(v, judge=self.id, usage={**v.usage, "settled_by": "llm"})

    def calls_saved(self) -> int:
        return self._saved

    def check_reachable(self) -> None:
        self.llm.check_reachable()

    def estimate(self, n_turns: int) -> dict[str, float | int | None]:
        """Upper bound: the LLM judges everything (the settled share isn't known yet)."""
        return {**self.llm.estimate(n_turns), "upper_bound": 1}

    def close(self) -> None:
        self.offline.close()
        self.llm.close()
