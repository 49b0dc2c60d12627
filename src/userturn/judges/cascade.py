"""Cascade judge: the offline judge settles the clear degenerate cases, the LLM judge the rest.

Spec: ``cascade:<llm judge spec>``, e.g. ``cascade:openai:gpt-5.4-mini`` or
``cascade:llm:llamacpp:judge.gguf``. Why: most degenerate turns of small models are
mechanical (empty output, template tokens, a verbatim copy of the prompt or the answer),
and paying an LLM to say so is waste. But the offline judge is tuned for overall κ, not
for certainty, so its verdict only settles a turn when an independent, stricter check
finds the evidence for that same label:

- ``degenerate_short``: no word at all, or at most two words and no question;
- ``malformed_artifact``: a chat-template or role token the context doesn't contain
  (special tokens, or a role header leaked as text such as ``ibleymodel`` on its own line);
- ``previous_turn_restate`` / ``assistant_turn_restate``: at least 8 words, and at least
  90% of the turn's word 4-grams occur in the user prompt / the assistant answer.

Everything else, including every turn the offline judge calls genuine, goes to the LLM
judge. ``calls_saved()`` counts the turns settled without an LLM call.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import replace

from userturn.judges import load_judge
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
        return "at most two words" if len(words) <= 2 and "?" not in inp.user_turn else None
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
        self.version = f"{self.offline.version}+{self.llm.version}"
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
            why = (
                evidence(inp, verdict.label)
                if verdict.status == "ok" and verdict.genuine is False
                else None
            )
            if why is None:
                todo.append(i)
                continue
            self._saved += 1
            yield (
                i,
                Judgment(
                    self.id,
                    False,
                    verdict.label,
                    f"offline ({why}): {verdict.rationale}",
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
