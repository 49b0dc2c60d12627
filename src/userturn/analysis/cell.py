"""The summary.json cells, one typed cell per probe: what analysis builds from a run's
records and every reader of a summary (tables, plots, comparisons, the report) works from.

A generation cell and a rollout cell share the judged rate (:class:`JudgedCell`); a
rollout cell adds survival; a likelihood cell has no judge and holds the likelihood
measures instead. Readers tell them apart by type. summary.json keeps one flat shape for
every cell (:data:`FIELDS`, in that order): a field a probe's cell does not have is
written as its empty value, so a summary reads the same whichever probe made it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from userturn.types import Probe


@dataclass(frozen=True)
class CellBase:
    """What every cell has: its key and its size.

    The cell key is (model, dataset, temperature, perturbation, judge, config, probe,
    turn): a cell never pools two configs, two probes or two rollout turns.
    """

    probe: ClassVar[Probe]
    model: str
    dataset: str
    temperature: float | None
    perturbation: str
    judge: str | None
    config: str
    turn: int | None = None
    """The rollout turn (1..N); None for the one-turn probe."""
    family: str = ""
    n_total: int = 0
    """User turns (a likelihood cell: contexts scored) in the cell."""
    n: int = 0
    """The rate's denominator: judgments with status ok (a likelihood cell: contexts)."""
    n_items: int = 0

    def to_json(self) -> dict[str, Any]:
        """The summary.json object: every field of :data:`FIELDS`, in its order."""
        mine = {f.name for f in fields(self)}
        out: dict[str, Any] = {}
        for name, empty in FIELDS.items():
            if name == "probe":
                out[name] = self.probe
            elif name in mine:
                value = getattr(self, name)
                out[name] = dict(value) if isinstance(value, dict) else value
            else:
                out[name] = dict(empty) if isinstance(empty, dict) else empty
        for name in K_KEYED:
            if out[name] is not None:
                out[name] = {str(k): v for k, v in out[name].items()}
        if out["item_rate_histogram"] is not None:
            out["item_rate_histogram"] = list(out["item_rate_histogram"])
        return out


@dataclass(frozen=True)
class JudgedCell(CellBase):
    """A cell of judged user turns: the rate of genuine follow-ups, its correction by the
    judge's card, and the item spread."""

    turns: ClassVar[bool]

    genuine: int = 0
    rate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_method: str = ""
    samples: int = 0
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
    judge_card_sha: str | None = None
    """``card.card_digest`` of the card behind the corrected figures (one judge version
    can have several cards as its reference files grow)."""
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
    items_never_corrected: float | None = None
    """The never share corrected through the judge's error model: what a judge that never
    errs would report on the same items and samples (cells with k > 1 and a card)."""
    items_never_corrected_ci_low: float | None = None
    items_never_corrected_ci_high: float | None = None
    items_sometimes_corrected: float | None = None
    items_sometimes_corrected_ci_low: float | None = None
    items_sometimes_corrected_ci_high: float | None = None
    items_always_corrected: float | None = None
    items_always_corrected_ci_low: float | None = None
    items_always_corrected_ci_high: float | None = None
    challenge_rate: float | None = None
    challenge_n: int = 0
    n_not_applied: int = 0
    """Turns whose perturbation could not apply (they saw the original answer); kept out
    of ``n_total`` and the rate."""

    @property
    def failed(self) -> int:
        """Judgments that did not come back ok (unparseable or errored)."""
        return self.unparseable + self.errors


@dataclass(frozen=True)
class GenerateCell(JudgedCell):
    """The generation probe's cell (one user turn per sample)."""

    probe: ClassVar[Probe] = "generate"
    turns: ClassVar[bool] = False


@dataclass(frozen=True)
class RolloutCell(JudgedCell):
    """One turn of a rollout: the judged rate at turn t, and survival up to it."""

    probe: ClassVar[Probe] = "rollout"
    turns: ClassVar[bool] = True
    """A rollout cell is keyed by its turn too."""
    survival: float | None = None
    survival_ci_low: float | None = None
    survival_ci_high: float | None = None
    survival_null: float | None = None
    """Survival a judge with these error rates reports when no turn is genuine:
    (1 - specificity)^turn."""


@dataclass(frozen=True)
class LikelihoodCell(CellBase):
    """The likelihood probe's cell: scores of the real next user turn, no judge."""

    probe: ClassVar[Probe] = "likelihood"
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


CellSummary = GenerateCell | RolloutCell | LikelihoodCell
"""Any summary.json cell."""
JUDGED_BY_PROBE: dict[str, type[GenerateCell | RolloutCell]] = {
    c.probe: c for c in (GenerateCell, RolloutCell)
}
"""The judged cell a probe's user turns make, by the probe their records name."""
BY_PROBE: dict[str, type[CellSummary]] = {
    c.probe: c for c in (GenerateCell, RolloutCell, LikelihoodCell)
}

FIELDS: dict[str, Any] = {
    "model": None,
    "dataset": None,
    "temperature": None,
    "perturbation": None,
    "judge": None,
    "config": None,
    "probe": "generate",
    "turn": None,
    "family": "",
    "n_total": 0,
    "n": 0,
    "genuine": 0,
    "rate": None,
    "ci_low": None,
    "ci_high": None,
    "ci_method": "",
    "samples": 0,
    "n_items": 0,
    "unparseable": 0,
    "errors": 0,
    "accuracy": None,
    "n_answers": 0,
    "answers_truncated": 0,
    "answers_incomplete_reasoning": 0,
    "labels": {},
    "rate_corrected": None,
    "ci_corrected_low": None,
    "ci_corrected_high": None,
    "correction_note": None,
    "judge_card": None,
    "judge_card_sha": None,
    "correction_strata": None,
    "correction_sensitivity": None,
    "correction_specificity": None,
    "selected_by": None,
    "gf_at_k": None,
    "gf_at_k_corrected": None,
    "gf_at_k_corrected_ci": None,
    "gf_at_k_null": None,
    "items_never": None,
    "items_sometimes": None,
    "items_always": None,
    "item_rate_histogram": None,
    "items_never_null": None,
    "items_sometimes_null": None,
    "items_always_null": None,
    "items_never_corrected": None,
    "items_never_corrected_ci_low": None,
    "items_never_corrected_ci_high": None,
    "items_sometimes_corrected": None,
    "items_sometimes_corrected_ci_low": None,
    "items_sometimes_corrected_ci_high": None,
    "items_always_corrected": None,
    "items_always_corrected_ci_low": None,
    "items_always_corrected_ci_high": None,
    "challenge_rate": None,
    "challenge_n": 0,
    "n_not_applied": 0,
    "preference_accuracy": None,
    "preference_ci_low": None,
    "preference_ci_high": None,
    "margin": None,
    "margin_ci_low": None,
    "margin_ci_high": None,
    "likelihood_version": None,
    "likelihood_excluded": 0,
    "pmi_share": None,
    "pmi_share_ci_low": None,
    "pmi_share_ci_high": None,
    "pmi_mean": None,
    "pmi_mean_ci_low": None,
    "pmi_mean_ci_high": None,
    "pmi_control_share": None,
    "pmi_control_mean": None,
    "pmi_excess_share": None,
    "pmi_excess_share_ci_low": None,
    "pmi_excess_share_ci_high": None,
    "pmi_excess_mean": None,
    "pmi_excess_mean_ci_low": None,
    "pmi_excess_mean_ci_high": None,
    "role_share": None,
    "role_share_ci_low": None,
    "role_share_ci_high": None,
    "role_mean": None,
    "role_mean_ci_low": None,
    "role_mean_ci_high": None,
    "role_auc": None,
    "role_auc_ci_low": None,
    "role_auc_ci_high": None,
    "survival": None,
    "survival_ci_low": None,
    "survival_ci_high": None,
    "survival_null": None,
}
"""Every summary.json field, in its order, with the value a cell without it writes."""

K_KEYED = ("gf_at_k", "gf_at_k_corrected", "gf_at_k_corrected_ci", "gf_at_k_null")
"""Cell fields keyed by k (strings in JSON)."""


def cell_from_json(data: dict[str, Any]) -> CellSummary:
    """A cell read back from summary.json (``compare`` on a run without its store); the
    probe field says which cell it is."""
    cls = BY_PROBE[str(data.get("probe") or "generate")]
    names = {f.name for f in fields(cls)}
    kept = {k: v for k, v in data.items() if k in names}
    kept.setdefault("config", "")
    for name in K_KEYED:
        if kept.get(name) is not None:
            kept[name] = {int(k): v for k, v in kept[name].items()}
    return cls(**kept)
