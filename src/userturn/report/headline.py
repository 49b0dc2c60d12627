"""The headline block at the top of ``report.html``: one line per model and dataset.

A reader opening a report wants the result before the method: each model's follow-up
rate, its judge-corrected rate and its task accuracy, each with a 95% CI. The block has
one small table per probe the run holds (one-turn, likelihood, rollout), because each
probe measures something different and its numbers must not share a column.
"""

from __future__ import annotations

from dataclasses import dataclass

from userturn.analysis.cell import GenerateCell, LikelihoodCell, RolloutCell
from userturn.analysis.tables import corrected_text, pct, rate_ci, temp
from userturn.analysis.views import AccuracyRow, Analysis


@dataclass(frozen=True)
class Headline:
    probe: str
    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str


def _lowest_t(cells: list[GenerateCell]) -> dict[tuple[str, str, str], GenerateCell]:
    """Per (model, dataset, config), the unperturbed cell at the lowest temperature (the
    greedy one when the run has T=0: the single answer a user would see)."""
    out: dict[tuple[str, str, str], GenerateCell] = {}
    for c in cells:
        k = (c.model, c.dataset, c.config)
        if k not in out or (c.temperature or 0.0) < (out[k].temperature or 0.0):
            out[k] = c
    return out


def _accuracy(row: AccuracyRow | None) -> str:
    """Accuracy with its CI, and a warning when answers hit the token limit (a cut answer
    has no final answer and counts as wrong, so the figure then measures the budget)."""
    if row is None or row.accuracy is None:
        return "not scored"
    text = rate_ci(row.accuracy, row.ci_low, row.ci_high)
    if row.answers_truncated:
        text += f" ({row.answers_truncated} of {row.n_answers} answers truncated)"
    return text


def _generate(a: Analysis, judge: str | None) -> Headline | None:
    cells = [
        c
        for c in a.cells
        if isinstance(c, GenerateCell) and c.judge == judge and c.perturbation == "none"
    ]
    if judge is None or not cells:
        return None
    acc = {(r.model, r.dataset, r.config): r for r in a.accuracy}
    several = len(a.configs) > 1
    rows = [
        [
            c.model + (f" [{c.config}]" if several else ""),
            c.dataset,
            temp(c.temperature),
            rate_ci(c.rate, c.ci_low, c.ci_high),
            corrected_text(c),
            _accuracy(acc.get(k)),
            str(c.n),
        ]
        for k, c in _lowest_t(cells).items()
    ]
    return Headline(
        "generate",
        f"Genuine follow-up rate (judge {judge})",
        ["model", "dataset", "T", "follow-up rate", "corrected", "accuracy", "n"],
        rows,
        "No perturbation, lowest temperature. Corrected: the rate adjusted for the judge's "
        "measured errors (its card); '–' when the run's judge has no card. 95% CIs.",
    )


def _likelihood(a: Analysis) -> Headline | None:
    cells = [c for c in a.cells if isinstance(c, LikelihoodCell) and c.perturbation == "none"]
    if not cells:
        return None
    acc = {(r.model, r.dataset, r.config): r for r in a.accuracy}
    rows = [
        [
            c.model,
            c.dataset,
            rate_ci(c.pmi_share, c.pmi_share_ci_low, c.pmi_share_ci_high),
            rate_ci(c.role_share, c.role_share_ci_low, c.role_share_ci_high),
            rate_ci(c.preference_accuracy, c.preference_ci_low, c.preference_ci_high),
            _margin(c),
            _accuracy(acc.get((c.model, c.dataset, c.config))),
            str(c.n),
        ]
        for c in cells
    ]
    return Headline(
        "likelihood",
        "Likelihood probe (no judge)",
        [
            *("model", "dataset", "answer PMI > 0", "role contrast > 0"),
            *("ranking: real preferred", "margin, nats/token", "accuracy", "contexts"),
        ],
        rows,
        "Answer PMI > 0: contexts whose real next user turn is more likely after the real "
        "answer than after counterfactual ones. Role contrast > 0: contexts where it is more "
        "likely as a user turn than as an assistant turn. Ranking (secondary): the real turn "
        "above every degenerate one by mean per-token log-likelihood, which copies win. "
        "95% CIs.",
    )


def _margin(c: LikelihoodCell) -> str:
    if c.margin is None:
        return "–"
    if c.margin_ci_low is None or c.margin_ci_high is None:
        return f"{c.margin:+.2f}"
    return f"{c.margin:+.2f} [{c.margin_ci_low:+.2f}, {c.margin_ci_high:+.2f}]"


def _rollout(a: Analysis, judge: str | None) -> Headline | None:
    cells = [c for c in a.cells if isinstance(c, RolloutCell) and c.judge == judge and c.turn]
    if judge is None or not cells:
        return None
    series: dict[tuple[str, str, str, float | None], list[RolloutCell]] = {}
    for c in cells:
        series.setdefault((c.model, c.dataset, c.perturbation, c.temperature), []).append(c)
    rows = []
    for (model, ds, pert, t), pts in series.items():
        pts.sort(key=lambda c: c.turn or 0)
        first, last = pts[0], pts[-1]
        rows.append(
            [
                model,
                ds + ("" if pert == "none" else f" · {pert}"),
                temp(t),
                rate_ci(first.rate, first.ci_low, first.ci_high),
                f"{pct(last.survival)} at turn {last.turn}"
                if last.survival_ci_low is None or last.survival_ci_high is None
                else f"{rate_ci(last.survival, last.survival_ci_low, last.survival_ci_high)}"
                f" at turn {last.turn}",
                str(first.n),
            ]
        )
    return Headline(
        "rollout",
        f"Rollouts (judge {judge})",
        ["model", "dataset", "T", "turn 1 genuine", "survival", "conversations"],
        rows,
        "Survival: conversations whose user turns were all genuine up to the last turn. "
        "95% CIs, clustered by item.",
    )


def headlines(a: Analysis, judge: str | None) -> list[Headline]:
    """The headline tables this run has, one-turn probe first."""
    return [h for h in (_generate(a, judge), _likelihood(a), _rollout(a, judge)) if h is not None]
