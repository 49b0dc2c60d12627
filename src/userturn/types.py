"""Typed records that flow between pipeline stages.

Stages are plain functions over these records; only backends and judges hold state.
Records are frozen dataclasses so that a stage can't mutate what an earlier stage
stored, and so that they hash and compare by value in tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ConfigDict
from typing_extensions import TypedDict

Role = Literal["system", "user", "assistant"]
Label = Literal[
    "previous_turn_restate",
    "assistant_turn_restate",
    "meta_planning",
    "new_task_prompt",
    "malformed_artifact",
    "degenerate_short",
    "plausible_followup",
    "other",
]
LABELS: tuple[Label, ...] = (
    "previous_turn_restate",
    "assistant_turn_restate",
    "meta_planning",
    "new_task_prompt",
    "malformed_artifact",
    "degenerate_short",
    "plausible_followup",
    "other",
)
JudgeStatus = Literal["ok", "unparseable", "error"]
Finish = Literal["stop", "length", "error"]
AnswerFinish = Literal["stop", "length", "length_in_reasoning", "error", "given"]
"""Why an answer ended; ``length_in_reasoning``: cut by the token limit inside an open
reasoning block, so there is no final answer (scored incorrect, counted per cell)."""
Probe = Literal["generate", "likelihood", "rollout"]
CONVERSATION_PROBES: frozenset[Probe] = frozenset({"rollout"})
"""Probes whose user turns are the turns of one conversation (``turn`` 1..N, each turn
its own cell); the other probes' records each stand alone."""


class _DetailCore(TypedDict):
    applied: bool
    """False when the perturbation could not apply and left the text as it was: such a
    turn is an unperturbed turn in disguise, counted apart, never as perturbed."""


class PerturbationDetail(_DetailCore, total=False):
    """What a perturbation changed beyond the text (``inject-error``'s answers), as the
    perturbation writes it and every reader reads it: stored on the user turn as
    ``perturbation_detail`` (JSON), read back by the store's SQL and by the analysis, and
    checked against these annotations when ``recover`` reads records.jsonl.
    ``applied`` is always there (``inject-error`` always writes ``version`` to ``seed``
    too, the rest where they apply). Keys are declared in the order they are written,
    which is the order a validated copy keeps; a key not declared here (a line from
    another version) is kept, after them.
    """

    __pydantic_config__ = ConfigDict(extra="allow")  # type: ignore[misc]

    version: str
    kind: str | None
    """``numeric`` or ``multiple_choice``; None when there is no gold answer."""
    original: str | None
    injected: str | None
    gold: str | None
    seed: int
    original_text: str
    injected_text: str
    """Multiple choice: both options' texts."""
    original_correct: bool
    occurrences: int
    changes: list[dict[str, Any]]
    """Each place rewritten: its span in the original answer, the old and the new text."""
    kept: int
    """Earlier mentions of the original value, left alone."""
    reason: str
    """Why it did not apply (only then)."""


DETAIL_APPLIED = "applied"
"""The key of ``PerturbationDetail`` the store's SQL reads; a turn without a detail was
perturbed as its text shows."""
HistoryReasoning = Literal["template", "strip", "keep"]

Message = dict[str, Any]
"""A chat message: ``{"role": ..., "content": ...}``, optionally ``reasoning_content``."""


@dataclass(frozen=True)
class Item:
    """One benchmark item or held-out conversation.

    ``messages`` ends with a user turn for self-answered items (the model answers it),
    or with an assistant turn for held-out items (the answer is given, not generated).
    """

    id: str
    dataset: str
    messages: tuple[Message, ...]
    reference: dict[str, Any] | None = None
    """Gold data for scoring (e.g. ``{"answer": "18"}``); never shown to a model or judge."""
    reference_turn: str | None = None
    """The real next user turn, when the source has one (held-out sets, MT-Bench)."""
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def held_out(self) -> bool:
        return bool(self.messages) and self.messages[-1]["role"] == "assistant"


@dataclass(frozen=True)
class SamplingParams:
    """All sampling options as one object, as in vLLM's ``SamplingParams``."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    seed: int | None = None
    n: int = 1

    def key(self) -> dict[str, Any]:
        """What goes into a record's content hash (``n`` and ``seed`` are per sample)."""
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "max_tokens": self.max_tokens,
            "stop": list(self.stop),
        }


@dataclass(frozen=True)
class GenRequest:
    """A rendered prompt for a raw completion, tagged with the role it writes.

    The role is carried so a backend can refuse to write a user turn it can't produce
    faithfully; backends never swap roles.
    """

    prompt: str
    role: Role
    params: SamplingParams
    seeds: tuple[int | None, ...] = (None,)
    """One seed per sample: ``len(seeds)`` samples share this prompt (and its prefix)."""
    prompt_token_ids: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Completion:
    text: str
    finish: Finish
    completion_tokens: int = 0


@dataclass(frozen=True)
class GenResult:
    """The samples for one request, in seed order, plus prompt-cache accounting."""

    completions: tuple[Completion, ...]
    prompt_tokens: int = 0
    prompt_tokens_reused: int = 0


@dataclass(frozen=True)
class Judgment:
    """One judge's verdict on one user turn.

    ``genuine`` and ``label`` are None unless ``status == "ok"``: an unparseable or failed
    judgment is kept and counted, never folded into "not genuine".
    """

    judge: str
    genuine: bool | None
    label: Label | None
    rationale: str
    status: JudgeStatus = "ok"
    usage: dict[str, Any] = field(default_factory=dict)
    probability: float | None = None
    """The judge's probability that the turn is genuine, when it has one (offline)."""
    challenges_answer: bool | None = None
    """Whether the turn disputes the answer's correctness; None when not assessed."""
    version: str = ""
    """The judge's version (rubric, thresholds): a newer one re-judges, never mixes."""

    def to_json(self) -> dict[str, Any]:
        """The ``judgments`` entry of a records.jsonl line."""
        ok = self.status == "ok"
        out: dict[str, Any] = {
            "judge": self.judge,
            "genuine_followup": self.genuine if ok else None,
            "label": self.label if ok else None,
            "rationale": self.rationale,
            "status": self.status,
        }
        if self.probability is not None:
            out["probability"] = self.probability if ok else None
        if self.challenges_answer is not None:
            out["challenges_answer"] = self.challenges_answer if ok else None
        return out

    def to_row(self) -> dict[str, Any]:
        """What the store keeps: the record entry plus version and usage."""
        return {**self.to_json(), "version": self.version, "usage": self.usage}

    @classmethod
    def from_row(cls, data: dict[str, Any]) -> Judgment:
        return cls(
            judge=str(data["judge"]),
            genuine=data.get("genuine_followup"),
            label=data.get("label"),
            rationale=str(data.get("rationale") or ""),
            status=data.get("status", "ok"),
            usage=dict(data.get("usage") or {}),
            probability=data.get("probability"),
            challenges_answer=data.get("challenges_answer"),
            version=str(data.get("version") or ""),
        )


@dataclass(frozen=True)
class JudgeInput:
    """What a judge may see: the context and the candidate turn, nothing else."""

    id: str
    messages: tuple[Message, ...]
    user_turn: str

    @classmethod
    def of_row(cls, row: dict[str, Any]) -> JudgeInput:
        """A reference-file row (``id``, ``messages``, ``user_turn``) as a judge sees it.

        One reading of those fields, so that cards, benches and tests hand a judge the
        same thing for the same row.
        """
        return cls(str(row["id"]), tuple(row["messages"]), str(row["user_turn"]))


@dataclass(frozen=True)
class ScoreRequest:
    """Candidate continuations of one rendered prompt, to be scored by log-likelihood.

    The likelihood probe asks what the model believes comes next under its own user
    header: ``prompt`` is the exact user-turn prompt the generation probe renders, and
    each continuation is a candidate user turn plus the template's user end marker.
    Candidates share the prompt, so a backend evaluates it once and scores each
    continuation in the prompt's KV prefix.
    """

    prompt: str
    continuations: tuple[str, ...]


@dataclass(frozen=True)
class ContinuationScore:
    """Log-likelihood of one continuation given the prompt (natural log)."""

    logprob: float
    """Sum of the continuation tokens' log-probabilities."""
    n_tokens: int
    token_logprobs: tuple[float, ...] = ()


@dataclass(frozen=True)
class ScoreResult:
    """Scores for one ``ScoreRequest``, in continuation order, plus cache accounting."""

    scores: tuple[ContinuationScore, ...]
    prompt_tokens: int = 0
    prompt_tokens_reused: int = 0
