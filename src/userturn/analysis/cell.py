"""The summary.json cell: what analysis builds from a run's records and every reader of a
summary (tables, plots, comparisons, the report) works from."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from userturn.types import Probe


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
