"""What a run stores and writes: the one place that says what a record is.

Stages pass these frozen dataclasses, never loose dicts, so a reader finds every field
of an answer or a user turn here, with its meaning. The store keeps each record as its
indexed columns plus a JSON ``data`` column (``to_row``/``from_row``); ``records.jsonl``
lines are built by :func:`record_line` from the same objects, so the output contract
(the keys of a line) is this code.

Keys: every record's key is a content hash (:func:`content_key`) of what produced it,
including the run's config fingerprint and the dataset, so two experiments or two
datasets can never share a row.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

from userturn.run.likelihood import LikelihoodRecord
from userturn.types import AnswerFinish, Judgment, Message, Probe


def content_key(*parts: Any) -> str:
    """A stable hash of JSON-serialisable parts (dict keys sorted)."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


def derive_seed(run_seed: int, *parts: object) -> int:
    """seed = hash(run seed, item, T, sample index): stable across runs and executors."""
    blob = "\x1f".join(str(p) for p in (run_seed, *parts)).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:4], "big") & 0x7FFFFFFF


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
    perturbation_detail: dict[str, Any] | None = None
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


def record_line(
    turn: UserTurnRecord, answer: AnswerRecord | None, judgments: list[Judgment]
) -> dict[str, Any]:
    """One records.jsonl line (the documented keys, plus every other stored field, so the
    store can be rebuilt from the lines), in a stable key order."""
    return {
        "id": turn.key,
        "item_id": turn.item_id,
        "model": turn.model,
        "context_model": turn.context_model,
        "family": turn.family,
        "dataset": turn.dataset,
        "config": turn.config,
        "probe": turn.probe,
        "turn": turn.turn,
        "temperature": turn.temperature,
        "sample": turn.sample,
        "seed": turn.seed,
        "perturbation": turn.perturbation,
        "perturbation_version": turn.perturbation_version,
        "perturbation_detail": turn.perturbation_detail,
        "messages": list(turn.messages),
        "answer_key": turn.answer_key,
        **answer_fields(answer),
        "user_turn": turn.user_turn,
        "user_finish": turn.user_finish,
        "user_tokens": turn.user_tokens,
        "thinking_markup": turn.thinking_markup,
        "content_survived": turn.content_survived,
        "removed": turn.removed,
        "prompt_sha": turn.prompt_sha,
        "template_sha": turn.template_sha,
        "prompt_tokens": turn.prompt_tokens,
        "prompt_tokens_reused": turn.prompt_tokens_reused,
        "reference_turn": turn.reference_turn,
        "candidates": None if turn.candidates is None else list(turn.candidates),
        "judgments": [j.to_row() for j in judgments],
    }


def likelihood_line(rec: LikelihoodRecord, answer: AnswerRecord | None) -> dict[str, Any]:
    """One likelihood-probe records.jsonl line: the record's own line plus its token
    counts and the answer it followed (a generated one, e.g. MT-Bench's, is referenced by
    no user turn, so without it here a recovered run would generate it again)."""
    return {
        **rec.to_line(),
        "prompt_tokens": rec.prompt_tokens,
        "prompt_tokens_reused": rec.prompt_tokens_reused,
        **answer_fields(answer),
    }


@dataclass(frozen=True)
class CellSummary:
    """One summary.json cell: the rate of genuine follow-ups in one slice of the run.

    The cell key is (model, dataset, temperature, perturbation, judge, config, probe,
    turn): a cell never pools two configs, two probes or two rollout turns. Fields that
    do not apply to a cell are None (never missing from summary.json).
    """

    model: str
    dataset: str
    temperature: float | None
    perturbation: str
    judge: str | None
    config: str
    probe: Probe = "generate"
    turn: int | None = None
    """The rollout turn (1..N); None for the one-turn probe."""
    family: str = ""
    n_total: int = 0
    """User turns in the cell."""
    n: int = 0
    """Judgments with status ok: the rate's denominator."""
    genuine: int = 0
    rate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_method: str = ""
    samples: int = 0
    n_items: int = 0
    unparseable: int = 0
    errors: int = 0
    accuracy: float | None = None
    n_answers: int = 0
    answers_truncated: int = 0
    answers_incomplete_reasoning: int = 0
    labels: dict[str, int] = field(default_factory=dict)
    rate_corrected: float | None = None
    ci_corrected_low: float | None = None
    ci_corrected_high: float | None = None
    correction_note: str | None = None
    judge_card: str | None = None
    correction_strata: dict[str, str | None] | None = None
    """Card strata the correction used (``{"dataset": "gsm8k", "model": ...}``); a None
    value: the card does not cover the run on that axis (extrapolated, see the note)."""
    correction_sensitivity: float | None = None
    correction_specificity: float | None = None
    selected_by: str | None = None
    """Best-of rollouts: the judge that chose the kept turns (their cells are never
    corrected: the card describes turns nobody selected)."""
    gf_at_k: dict[int, float] | None = None
    gf_at_k_corrected: dict[int, float] | None = None
    gf_at_k_corrected_ci: dict[int, list[float]] | None = None
    gf_at_k_null: dict[int, float] | None = None
    """GF@k a judge with the card's error rates reports when no turn is genuine."""
    items_never: float | None = None
    items_sometimes: float | None = None
    items_always: float | None = None
    item_rate_histogram: list[int] | None = None
    """Items per tenth of per-item rate ([0, 0.1), ..., [0.9, 1.0])."""
    items_never_null: float | None = None
    items_sometimes_null: float | None = None
    items_always_null: float | None = None
    """The never/sometimes/always shares a judge with these error rates reports when no
    turn is genuine."""
    challenge_rate: float | None = None
    challenge_n: int = 0
    n_not_applied: int = 0
    """Turns whose perturbation could not apply (they saw the original answer); kept out
    of ``n_total`` and the rate."""
    preference_accuracy: float | None = None
    preference_ci_low: float | None = None
    preference_ci_high: float | None = None
    margin: float | None = None
    margin_ci_low: float | None = None
    margin_ci_high: float | None = None
    likelihood_version: str | None = None
    """The likelihood records' candidates version (``2``: the measures below)."""
    likelihood_excluded: int = 0
    """Contexts left out: their reference turn equals a turn of the context."""
    pmi_share: float | None = None
    """Answer PMI of the real next turn: share of contexts above 0 (Wilson CI)."""
    pmi_share_ci_low: float | None = None
    pmi_share_ci_high: float | None = None
    pmi_mean: float | None = None
    """Mean answer PMI of the real next turn, nats (bootstrap CI over contexts)."""
    pmi_mean_ci_low: float | None = None
    pmi_mean_ci_high: float | None = None
    pmi_control_share: float | None = None
    """The same share for the unrelated-request control."""
    pmi_control_mean: float | None = None
    pmi_excess_share: float | None = None
    """``pmi_share`` minus ``pmi_control_share`` (paired bootstrap CI over contexts)."""
    pmi_excess_share_ci_low: float | None = None
    pmi_excess_share_ci_high: float | None = None
    pmi_excess_mean: float | None = None
    """Mean of (real minus control) answer PMI per context, nats."""
    pmi_excess_mean_ci_low: float | None = None
    pmi_excess_mean_ci_high: float | None = None
    role_share: float | None = None
    """Role contrast of the real next turn (user minus assistant header): share above 0."""
    role_share_ci_low: float | None = None
    role_share_ci_high: float | None = None
    role_mean: float | None = None
    role_mean_ci_low: float | None = None
    role_mean_ci_high: float | None = None
    role_auc: float | None = None
    """AUC of the role contrast, real next turn against the answer's opening."""
    role_auc_ci_low: float | None = None
    role_auc_ci_high: float | None = None
    survival: float | None = None
    survival_ci_low: float | None = None
    survival_ci_high: float | None = None
    survival_null: float | None = None
    """Survival a judge with these error rates reports when no turn is genuine:
    (1 - specificity)^turn."""

    @property
    def failed(self) -> int:
        """Judgments that did not come back ok (unparseable or errored)."""
        return self.unparseable + self.errors

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for name in K_KEYED:
            if out[name] is not None:
                out[name] = {str(k): v for k, v in out[name].items()}
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CellSummary:
        """A cell read back from summary.json (``compare`` on a run without its store)."""
        names = {f.name for f in fields(cls)}
        kept = {k: v for k, v in data.items() if k in names}
        kept.setdefault("config", "")
        for name in K_KEYED:
            if kept.get(name) is not None:
                kept[name] = {int(k): v for k, v in kept[name].items()}
        return cls(**kept)


K_KEYED = ("gf_at_k", "gf_at_k_corrected", "gf_at_k_corrected_ci", "gf_at_k_null")
"""CellSummary fields keyed by k (strings in JSON)."""


@dataclass(frozen=True)
class Transcript:
    """A user turn with its verdicts: what readers of a run (self-play pairs, packets,
    exports) work from, by field."""

    turn: UserTurnRecord
    judgments: tuple[Judgment, ...] = ()

    def verdict(self, judge: str) -> Judgment | None:
        return next((j for j in self.judgments if j.judge == judge), None)
