"""The likelihood probe: what does the model believe comes next, under its own user header?

For a context whose real next user turn is known (held-out conversations, MT-Bench's
scripted second turn, ``jsonl`` rows with ``reference_turn``), the probe renders exactly
the prompt the generation probe continues and scores candidate next user turns by their
mean per-token log-likelihood, each followed by the template's user end marker:

- ``real``: the person's actual next turn;
- ``previous_turn_restate``: the previous user turn, verbatim;
- ``assistant_turn_restate``: the opening of the assistant's answer (its first sentence,
  at most ``OPENING_WORDS`` words);
- ``new_task_prompt``: one fixed unrelated request, the first user message of another
  item of the same dataset (chosen by a hash of the item id, so it never changes).

A context "prefers" the real turn when it beats every degenerate candidate; the margin
is the real turn's score minus the best degenerate one's. No judge is involved, so the
measure costs no judge error. Candidates are built deterministically and versioned
(``CANDIDATES_VERSION``), and every record stores its candidates and their scores.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from userturn.types import Item, Message, ScoreRequest

CANDIDATES_VERSION = "1"
OPENING_WORDS = 40
CandidateKind = Literal[
    "real", "previous_turn_restate", "assistant_turn_restate", "new_task_prompt"
]
_SENTENCE = re.compile(r"(.+?[.!?])(\s|$)", re.S)


@dataclass(frozen=True)
class ScoredCandidate:
    kind: CandidateKind
    text: str
    logprob: float
    """Sum of the continuation's token log-probabilities (candidate + user end marker)."""
    n_tokens: int

    @property
    def mean(self) -> float:
        """Mean per-token log-likelihood: comparable across candidates of any length."""
        return self.logprob / max(self.n_tokens, 1)


def opening(answer: str) -> str:
    """The assistant answer's first sentence, at most ``OPENING_WORDS`` words."""
    text = answer.strip()
    match = _SENTENCE.match(text)
    first = match.group(1) if match else text
    words = first.split()
    return " ".join(words[:OPENING_WORDS])


def unrelated(item: Item, pool: list[Item]) -> str | None:
    """The first user message of another item, fixed per item (hash of its id)."""
    others = [it for it in pool if it.id != item.id]
    if not others:
        return None
    pick = int(hashlib.sha256(item.id.encode()).hexdigest()[:8], 16) % len(others)
    first = next((m for m in others[pick].messages if m["role"] == "user"), None)
    return None if first is None else str(first["content"])


def candidates(
    item: Item, context: list[Message], pool: list[Item]
) -> list[tuple[CandidateKind, str]]:
    """The candidates for one context (which ends with the assistant turn), real first.
    Empty when the item has no real next turn, or a candidate can't be built."""
    users = [str(m["content"]) for m in context if m["role"] == "user"]
    other = unrelated(item, pool)
    if item.reference_turn is None or not users or other is None:
        return []
    return [
        ("real", item.reference_turn),
        ("previous_turn_restate", users[-1]),
        ("assistant_turn_restate", opening(str(context[-1]["content"]))),
        ("new_task_prompt", other),
    ]


def score_request(prompt: str, cands: list[tuple[CandidateKind, str]], end: str) -> ScoreRequest:
    return ScoreRequest(prompt=prompt, continuations=tuple(text + end for _, text in cands))


@dataclass(frozen=True)
class LikelihoodRecord:
    """One context's candidates and their scores under the model's own user header."""

    key: str
    answer_key: str
    item_id: str
    model: str
    dataset: str
    config: str
    perturbation: str
    messages: tuple[Message, ...]
    candidates: tuple[ScoredCandidate, ...]
    family: str = ""
    prompt_sha: str | None = None
    template_sha: str | None = None
    candidates_version: str = CANDIDATES_VERSION
    prompt_tokens: int = 0
    prompt_tokens_reused: int = 0

    COLUMNS: ClassVar[frozenset[str]] = frozenset(
        {"key", "item_id", "model", "dataset", "config", "perturbation"}
    )

    @property
    def real(self) -> ScoredCandidate:
        return next(c for c in self.candidates if c.kind == "real")

    @property
    def best_degenerate(self) -> ScoredCandidate:
        return max((c for c in self.candidates if c.kind != "real"), key=lambda c: c.mean)

    @property
    def prefers_real(self) -> bool:
        return self.real.mean > self.best_degenerate.mean

    @property
    def margin(self) -> float:
        return self.real.mean - self.best_degenerate.mean

    def to_row(self) -> dict[str, Any]:
        return {
            "answer_key": self.answer_key,
            "messages": list(self.messages),
            "candidates": [_json(c) for c in self.candidates],
            "family": self.family,
            "prompt_sha": self.prompt_sha,
            "template_sha": self.template_sha,
            "candidates_version": self.candidates_version,
            "prompt_tokens": self.prompt_tokens,
            "prompt_tokens_reused": self.prompt_tokens_reused,
        }

    @classmethod
    def from_row(cls, columns: dict[str, Any], data: dict[str, Any]) -> LikelihoodRecord:
        cands = tuple(ScoredCandidate(**c) for c in data["candidates"])
        rest = {k: v for k, v in data.items() if k not in ("candidates", "messages")}
        return cls(**columns, messages=tuple(data["messages"]), candidates=cands, **rest)

    def to_line(self) -> dict[str, Any]:
        """Its records.jsonl line (``probe: "likelihood"``, one per context)."""
        return {
            "id": self.key,
            "item_id": self.item_id,
            "model": self.model,
            "family": self.family,
            "dataset": self.dataset,
            "config": self.config,
            "probe": "likelihood",
            "perturbation": self.perturbation,
            "messages": list(self.messages),
            "answer_key": self.answer_key,
            "candidates": [{**_json(c), "mean_logprob": c.mean} for c in self.candidates],
            "candidates_version": self.candidates_version,
            "prefers_real": self.prefers_real,
            "margin": self.margin,
            "prompt_sha": self.prompt_sha,
            "template_sha": self.template_sha,
        }


def _json(c: ScoredCandidate) -> dict[str, Any]:
    return {"kind": c.kind, "text": c.text, "logprob": c.logprob, "n_tokens": c.n_tokens}
