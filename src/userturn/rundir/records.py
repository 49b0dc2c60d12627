"""What a run stores and writes: the one place that says what a record is.

Stages pass these frozen dataclasses, never loose dicts, so a reader finds every field
of an answer or a user turn here, with its meaning. The store keeps each record as its
indexed columns plus a JSON ``data`` column (``to_row``/``from_row``); ``records.jsonl``
lines are built from the same objects (``userturn.rundir.lines``), so the output
contract (the keys of a line) is this code. Keys are content hashes
(``userturn.rundir.keys``). The likelihood probe's record is here too, so the store and
analysis read it without the probe.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar, Literal

from userturn.types import AnswerFinish, Judgment, Message, PerturbationDetail, Probe

CANDIDATES_VERSION = "2"
"""2: answer PMI and role contrast, no end marker scored; 1: the ranking alone."""
CandidateKind = Literal[
    "real", "previous_turn_restate", "assistant_turn_restate", "new_task_prompt"
]


def _data(obj: Any, columns: Collection[str]) -> dict[str, Any]:
    """The record's fields that are not indexed columns (the JSON ``data`` column)."""
    return {k: v for k, v in asdict(obj).items() if k not in columns}


@dataclass(frozen=True)
class AnswerRecord:
    """The assistant turn of one item: generated (scored) or given (held-out sets)."""

    key: str
    item_id: str
    dataset: str
    model: str
    """Who wrote it; "" for a given answer (held-out conversations)."""
    config: str
    text: str
    """The raw answer, reasoning included."""
    final: str
    """What is scored and shown to the user stage ("" when reasoning never closed)."""
    finish: AnswerFinish
    reasoning: str | None = None
    completion_tokens: int = 0
    prompt_sha: str | None = None
    template_sha: str | None = None
    prompt_tokens: int = 0
    prompt_tokens_reused: int = 0
    correct: bool | None = None
    """Task accuracy; None when the dataset is not scored."""
    score: dict[str, Any] | None = None
    """The scorer's detail (extracted answer, instruction results, ...)."""
    reference: dict[str, Any] | None = None
    """The item's gold data, kept so ``userturn rescore`` can re-apply a changed scorer."""

    COLUMNS: ClassVar[tuple[str, ...]] = ("key", "item_id", "model", "dataset", "config")
    """The fields the store keeps in indexed columns, in table order; the rest is JSON."""

    @property
    def truncated(self) -> bool:
        """Stopped by the token limit: an unplanned truncation, counted per cell."""
        return self.finish in ("length", "length_in_reasoning")

    @property
    def incomplete_reasoning(self) -> bool:
        return self.finish == "length_in_reasoning"

    def to_row(self) -> dict[str, Any]:
        return _data(self, self.COLUMNS)

    @classmethod
    def from_row(cls, columns: dict[str, Any], data: dict[str, Any]) -> AnswerRecord:
        names = {f.name for f in fields(cls)}
        return cls(**columns, **{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class UserTurnRecord:
    """One user turn written by the model (or a real person's, for ``human-reference``)."""

    key: str
    answer_key: str
    item_id: str
    model: str
    dataset: str
    config: str
    temperature: float | None
    """None for turns nobody sampled (the real next human turn)."""
    sample: int
    seed: int | None
    perturbation: str
    messages: tuple[Message, ...]
    """The context the model saw, ending with the (perturbed) assistant turn."""
    family: str = ""
    perturbation_version: str = ""
    perturbation_detail: PerturbationDetail | None = None
    """What the perturbation changed beyond the text (``inject-error``'s answers)."""
    probe: Probe = "generate"
    turn: int = 1
    """1 for the probe; 1..N in a rollout."""
    prompt_sha: str | None = None
    template_sha: str | None = None
    content_survived: bool = True
    removed: str | None = None
    """Assistant text the template dropped or rewrote, if any."""
    reference_turn: str | None = None
    user_turn: str = ""
    user_finish: str = ""
    """stop | length | error | human."""
    user_tokens: int = 0
    thinking_markup: bool = False
    prompt_tokens: int = 0
    prompt_tokens_reused: int = 0
    context_model: str | None = None
    """For ``human-reference`` rows: the model whose context the human turn follows."""
    candidates: tuple[dict[str, Any], ...] | None = None
    """Best-of-N rollouts: every sampled candidate with its verdict; one is ``chosen``."""

    COLUMNS: ClassVar[tuple[str, ...]] = (
        "key",
        "answer_key",
        "item_id",
        "model",
        "dataset",
        "config",
        "temperature",
        "sample",
        "seed",
        "perturbation",
        "probe",
        "turn",
    )
    """The fields the store keeps in indexed columns, in table order; the rest is JSON."""

    def to_row(self) -> dict[str, Any]:
        data = _data(self, self.COLUMNS)
        data["messages"] = list(self.messages)
        return data

    @classmethod
    def from_row(cls, columns: dict[str, Any], data: dict[str, Any]) -> UserTurnRecord:
        names = {f.name for f in fields(cls)}
        kept = {k: v for k, v in data.items() if k in names}
        kept["messages"] = tuple(kept.get("messages") or ())
        if kept.get("candidates") is not None:
            kept["candidates"] = tuple(kept["candidates"])
        return cls(**columns, **kept)


ANSWER_LINE_KEYS: dict[str, str] = {
    "model": "answer_model",
    "text": "answer",
    "reasoning": "answer_reasoning",
    "correct": "correct",
    "finish": "answer_finish",
    "completion_tokens": "answer_completion_tokens",
    "prompt_sha": "answer_prompt_sha",
    "template_sha": "answer_template_sha",
    "prompt_tokens": "answer_prompt_tokens",
    "prompt_tokens_reused": "answer_prompt_tokens_reused",
    "score": "answer_score",
    "reference": "answer_gold",
}
"""AnswerRecord field -> its key on a records.jsonl line. The fields left out are said by
the line itself (key as ``answer_key``; item, dataset and config are the turn's) or
derived from the text (``final``), so writer and reader share this one list."""


def answer_fields(answer: AnswerRecord | None) -> dict[str, Any]:
    """The answer's part of a records.jsonl line (all null when the store has none)."""
    out = {
        key: None if answer is None else getattr(answer, name)
        for name, key in ANSWER_LINE_KEYS.items()
    }
    out["answer_truncated"] = answer is not None and answer.truncated
    return out


@dataclass(frozen=True)
class Counterfactual:
    """One counterfactual answer: where it came from, and its text."""

    source: str
    """A perturbation id of the same item's answer, or ``other:<item id>``."""
    text: str


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


@dataclass(frozen=True)
class Transcript:
    """A user turn with its verdicts: what readers of a run (self-play pairs, packets,
    exports) work from, by field."""

    turn: UserTurnRecord
    judgments: tuple[Judgment, ...] = ()

    def verdict(self, judge: str) -> Judgment | None:
        return next((j for j in self.judgments if j.judge == judge), None)
