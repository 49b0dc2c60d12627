"""The likelihood probe: what does the model believe comes next, under its own user header?

For a context whose real next user turn is known (held-out conversations, MT-Bench's
scripted second turn, ``jsonl`` rows with ``reference_turn``), the probe renders exactly
the prompt the generation probe continues and scores candidate next user turns:

- ``real``: the person's actual next turn;
- ``previous_turn_restate``: the previous user turn, verbatim;
- ``assistant_turn_restate``: the opening of the assistant's answer (its first sentence,
  at most ``OPENING_WORDS`` words);
- ``new_task_prompt``: one fixed unrelated request, the first user message of another
  item of the same dataset (chosen by a hash of the item id, so it never changes).

Version 2 (the default) scores the real turn and the controls under more than one
condition (``likelihood_plan``): counterfactual answers (answer PMI) and the template's
assistant header (role contrast), each comparing the same text with itself. The
candidates' ranking by mean per-token log-likelihood (``prefers_real``, ``margin``) is
kept as a secondary field: it mostly measures how easy each text is to copy, so the real
turn almost never wins it. Version 1 records (ranking only, end marker scored) still
read. Candidates are built deterministically and versioned (``CANDIDATES_VERSION``), and
every record stores its candidates, conditions and scores.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, replace
from typing import Any, ClassVar, Literal

from userturn.run.likelihood_plan import Counterfactual, opening, scored_text
from userturn.types import Item, Message, ScoreRequest, ScoreResult

CANDIDATES_VERSION = "2"
"""2: answer PMI and role contrast, no end marker scored; 1: the ranking alone."""
CandidateKind = Literal[
    "real", "previous_turn_restate", "assistant_turn_restate", "new_task_prompt"
]


@dataclass(frozen=True)
class ScoredCandidate:
    kind: CandidateKind
    text: str
    logprob: float
    """Sum of the continuation's token log-probabilities (version 1: with the user end
    marker; version 2: the text alone)."""
    n_tokens: int
    condition: str = "user"
    """``user`` (the real context, user header), ``assistant`` (the template's assistant
    header) or ``cf<k>`` (the k-th counterfactual answer, user header)."""

    @property
    def mean(self) -> float:
        """Mean per-token log-likelihood: comparable across candidates of any length."""
        return self.logprob / max(self.n_tokens, 1)


def unrelated_item(item: Item, pool: list[Item]) -> Item | None:
    """The other item the unrelated request comes from, fixed per item (hash of its id)."""
    others = [it for it in pool if it.id != item.id]
    if not others:
        return None
    pick = int(hashlib.sha256(item.id.encode()).hexdigest()[:8], 16) % len(others)
    return others[pick]


def unrelated(item: Item, pool: list[Item]) -> str | None:
    """The first user message of another item, fixed per item (hash of its id)."""
    source = unrelated_item(item, pool)
    if source is None:
        return None
    first = next((m for m in source.messages if m["role"] == "user"), None)
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


CF_KINDS: tuple[CandidateKind, ...] = ("real", "new_task_prompt")
"""Scored under each counterfactual answer: the real turn and its unrelated control."""
ASSISTANT_KINDS: tuple[CandidateKind, ...] = ("real", "assistant_turn_restate")
"""Scored under the assistant header: the real turn and the answer's opening."""


def conditioned(
    cands: list[tuple[CandidateKind, str]], n_counterfactuals: int, assistant: bool = True
) -> tuple[ScoredCandidate, ...]:
    """Every (candidate, condition) pair a version 2 record scores, unscored, grouped by
    condition: all four under the user header, ``ASSISTANT_KINDS`` under the assistant
    header (left out where the template refuses two assistant turns in a row), then
    ``CF_KINDS`` under each counterfactual. The order is the requests' order."""
    text = dict(cands)
    out = [ScoredCandidate(k, t, 0.0, 0, "user") for k, t in cands]
    if assistant:
        out += [ScoredCandidate(k, text[k], 0.0, 0, "assistant") for k in ASSISTANT_KINDS]
    for i in range(n_counterfactuals):
        out += [ScoredCandidate(k, text[k], 0.0, 0, f"cf{i}") for k in CF_KINDS]
    return tuple(out)


def conditions(cands: tuple[ScoredCandidate, ...]) -> list[str]:
    """The conditions in the order their requests are sent."""
    return list(dict.fromkeys(c.condition for c in cands))


def score_requests(
    cands: tuple[ScoredCandidate, ...], prompts: dict[str, str], end: str
) -> list[ScoreRequest]:
    """One request per condition (its prompt, its candidates in order)."""
    return [
        ScoreRequest(
            prompt=prompts[cond],
            continuations=tuple(scored_text(c.text, end) for c in cands if c.condition == cond),
        )
        for cond in conditions(cands)
    ]


def filled(
    cands: tuple[ScoredCandidate, ...], results: list[ScoreResult]
) -> tuple[ScoredCandidate, ...]:
    """The candidates with the scores of ``score_requests``' results (same order)."""
    by_cond = {cond: list(res.scores) for cond, res in zip(conditions(cands), results, strict=True)}
    out = []
    for c in cands:
        s = by_cond[c.condition].pop(0)
        out.append(replace(c, logprob=s.logprob, n_tokens=s.n_tokens))
    return tuple(out)


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
    counterfactuals: tuple[Counterfactual, ...] = ()
    """The counterfactual answers ``cf<k>`` stands for (version 2)."""
    excluded: str | None = None
    """Why the context is left out of every measure (its reference copies a context turn);
    such a record has no candidates."""

    COLUMNS: ClassVar[frozenset[str]] = frozenset(
        {"key", "item_id", "model", "dataset", "config", "perturbation"}
    )

    def _user(self) -> list[ScoredCandidate]:
        return [c for c in self.candidates if c.condition == "user"]

    @property
    def real(self) -> ScoredCandidate:
        return next(c for c in self._user() if c.kind == "real")

    @property
    def best_degenerate(self) -> ScoredCandidate:
        return max((c for c in self._user() if c.kind != "real"), key=lambda c: c.mean)

    @property
    def prefers_real(self) -> bool | None:
        """The ranking (secondary): the real turn beats every degenerate candidate by mean
        per-token log-likelihood under the user header."""
        return None if self.excluded else self.real.mean > self.best_degenerate.mean

    @property
    def margin(self) -> float | None:
        return None if self.excluded else self.real.mean - self.best_degenerate.mean

    def logprob(self, kind: str, condition: str) -> float | None:
        found = [c for c in self.candidates if c.kind == kind and c.condition == condition]
        return found[0].logprob if found else None

    def pmi(self, kind: CandidateKind = "real") -> float | None:
        """Answer PMI of a candidate: under the real answer minus the mean under the
        counterfactual answers (nats, whole text). None for version 1 or no
        counterfactual."""
        base = self.logprob(kind, "user")
        alt = [self.logprob(kind, f"cf{i}") for i in range(len(self.counterfactuals))]
        if base is None or not alt or any(a is None for a in alt):
            return None
        return base - sum(a for a in alt if a is not None) / len(alt)

    def role(self, kind: CandidateKind = "real") -> float | None:
        """Role contrast of a candidate: under the user header minus under the assistant
        header (nats, whole text). None for version 1."""
        user, asst = self.logprob(kind, "user"), self.logprob(kind, "assistant")
        return None if user is None or asst is None else user - asst

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
            "counterfactuals": [asdict(c) for c in self.counterfactuals],
            "excluded": self.excluded,
        }

    @classmethod
    def from_row(cls, columns: dict[str, Any], data: dict[str, Any]) -> LikelihoodRecord:
        cands = tuple(ScoredCandidate(**c) for c in data["candidates"])
        cfs = tuple(Counterfactual(**c) for c in data.get("counterfactuals") or ())
        skip = ("candidates", "messages", "counterfactuals")
        rest = {k: v for k, v in data.items() if k not in skip}
        return cls(
            **columns,
            messages=tuple(data["messages"]),
            candidates=cands,
            counterfactuals=cfs,
            **rest,
        )

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
            "pmi_real": self.pmi("real"),
            "pmi_unrelated": self.pmi("new_task_prompt"),
            "role_real": self.role("real"),
            "role_opening": self.role("assistant_turn_restate"),
            "counterfactuals": [asdict(c) for c in self.counterfactuals],
            "excluded": self.excluded,
            "prompt_sha": self.prompt_sha,
            "template_sha": self.template_sha,
        }


def _json(c: ScoredCandidate) -> dict[str, Any]:
    return {
        "kind": c.kind,
        "text": c.text,
        "logprob": c.logprob,
        "n_tokens": c.n_tokens,
        "condition": c.condition,
    }
