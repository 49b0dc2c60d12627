"""The results table `userturn run` prints: one row per cell, for each probe.

Each column has two faces. On screen a rate reads ``26.0% [15.9%, 39.6%]``; in
``--format csv|json`` it is three numbers (``rate``, ``ci_low``, ``ci_high``), so a
script never parses a percentage. The machine columns are the same whatever the grid;
the screen drops a perturbation or judge column that would say the same on every row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from userturn.analysis.cell import (
    CellBase,
    CellSummary,
    GenerateCell,
    JudgedCell,
    LikelihoodCell,
    RolloutCell,
)
from userturn.analysis.cells import top_labels
from userturn.analysis.tables import (
    LIKELIHOOD_MEASURE_COLUMNS,
    Table,
    cards_used,
    extrapolated,
    strata_used,
)

Getter = Callable[[Any], Any]
"""A column's value from a cell (each table's cells are of one kind)."""
RATE = ("rate", "ci_low", "ci_high")
HEADLINE = ("genuine rate [95% CI]", "genuine [95% CI]", "PMI > 0 [95% CI]")
"""The column of each probe's table that leaves a narrow grid last."""
SURVIVAL = ("survival", "survival_ci_low", "survival_ci_high")
GF_AT_K = "GF@k"
GF_AT_K_CORRECTED = "GF@k corrected [95% CI]"
DETAIL = (
    "top failure labels",
    "unparseable",
    GF_AT_K_CORRECTED,
    GF_AT_K,
    "accuracy",
    "corrected [95% CI]",
    "n",
)
"""The columns that leave a narrow grid first, in this order (then the others from the
right; the headline last): the GF@k pair goes before accuracy and the corrected rate,
which every cell has, and its corrected value before the judged one, whose null floor is
the quick read."""
KEY = ("model", "dataset", "T", "perturbation", "judge", "turn")
"""The columns that name a row in the entries under the grid."""


@dataclass(frozen=True)
class Col:
    """A shown column and the machine columns behind it."""

    header: str
    show: Callable[[Any], str]
    data: tuple[tuple[str, Getter], ...]
    visible: bool = True


def build(name: str, title: str, cols: list[Col], cells: Sequence[CellBase]) -> Table:
    shown = [c for c in cols if c.visible]
    return Table(
        name,
        title,
        [c.header for c in shown],
        [[get(cell) for c in cols for _, get in c.data] for cell in cells],
        [[c.show(cell) for c in shown] for cell in cells],
        data_columns=[key for c in cols for key, _ in c.data],
    )


def pct_ci(x: float | None, lo: float | None, hi: float | None) -> str:
    if x is None or lo is None or hi is None:
        return "-"
    return f"{x:.1%} [{lo:.1%}, {hi:.1%}]"


def _attr(name: str) -> Getter:
    return lambda c: getattr(c, name)


def _text(name: str) -> Callable[[Any], str]:
    return lambda c: "-" if getattr(c, name) is None else str(getattr(c, name))


def _plain(header: str, name: str, key: str | None = None) -> Col:
    return Col(header, _text(name), ((key or name, _attr(name)),))


def _interval(header: str, keys: tuple[str, str, str], names: tuple[str, str, str]) -> Col:
    """``x [lo, hi]`` on screen; three machine columns ``keys`` from the fields ``names``."""
    x, lo, hi = names
    data = tuple((k, _attr(n)) for k, n in zip(keys, names, strict=True))
    return Col(header, lambda c: pct_ci(getattr(c, x), getattr(c, lo), getattr(c, hi)), data)


def _temperature() -> Col:
    return Col(
        "T",
        lambda c: "-" if c.temperature is None else f"{c.temperature:g}",
        (("T", _attr("temperature")),),
    )


def _accuracy(c: JudgedCell) -> str:
    """``4.0% (50)``; answers cut at the token limit are counted beside it."""
    if c.accuracy is None:
        return "-"
    cut = f", {c.answers_truncated} cut" if c.answers_truncated else ""
    return f"{c.accuracy:.1%} ({c.n_answers}{cut})"


def _corrected(c: JudgedCell) -> str:
    """The judge-corrected rate, or "undefined" (the reason is in summary.json)."""
    if c.rate_corrected is None:
        return "undefined" if c.judge_card else "-"
    mark = "*" if extrapolated(c) else ""
    return pct_ci(c.rate_corrected, c.ci_corrected_low, c.ci_corrected_high) + mark


def _top_k(c: JudgedCell) -> int | None:
    """The largest k of the cell's GF@k when it is above 1 (one sample per context has
    no GF@k to show beyond the rate itself), else None."""
    k = max(c.gf_at_k or {}, default=0)
    return k if k > 1 else None


def _at_top_k(c: JudgedCell, field: str) -> Any:
    """A GF@k field (a dict by k) at the cell's largest k; None without one."""
    k = _top_k(c)
    return None if k is None else (getattr(c, field) or {}).get(k)


def _gf_value(field: str) -> Getter:
    """``_at_top_k`` as a machine column's getter."""
    return lambda c: _at_top_k(c, field)


def _gf_ci(side: int) -> Getter:
    """One bound of the corrected GF@k's CI at the cell's largest k."""

    def get(c: JudgedCell) -> float | None:
        ci = _at_top_k(c, "gf_at_k_corrected_ci")
        return None if ci is None else ci[side]

    return get


def _gf_at_k(c: JudgedCell) -> str:
    """``GF@2 75.0% null 44.6%``: judged GF@k at the cell's largest k beside its null
    floor, what a judge with the card's error rates reports when no turn is genuine (a
    floor near the value leaves no evidence of genuine follow-ups). The k is in the
    value because the rows of one run differ in k (T=0 takes one sample)."""
    value = _at_top_k(c, "gf_at_k")
    if value is None:
        return "-"
    null = _at_top_k(c, "gf_at_k_null")
    return f"GF@{_top_k(c)} {value:.1%}" + ("" if null is None else f" null {null:.1%}")


def _gf_at_k_corrected(c: JudgedCell) -> str:
    """Corrected GF@k with its CI, marked as the corrected rate is when the card's error
    rates were extrapolated to this cell."""
    text = pct_ci(_at_top_k(c, "gf_at_k_corrected"), _gf_ci(0)(c), _gf_ci(1)(c))
    return text + ("*" if text != "-" and extrapolated(c) else "")


def _gf_columns(cells: Sequence[JudgedCell]) -> list[Col]:
    """GF@k beside its null floor and corrected, shown when some cell has k > 1; the
    machine columns are there for any grid (empty where a cell has one sample)."""
    shown = any(_top_k(c) is not None for c in cells)
    return [
        Col(
            GF_AT_K,
            _gf_at_k,
            (
                ("gf_k", _top_k),
                ("gf_at_k", _gf_value("gf_at_k")),
                ("gf_at_k_null", _gf_value("gf_at_k_null")),
            ),
            shown,
        ),
        Col(
            GF_AT_K_CORRECTED,
            _gf_at_k_corrected,
            (
                ("gf_at_k_corrected", _gf_value("gf_at_k_corrected")),
                ("gf_at_k_corrected_ci_low", _gf_ci(0)),
                ("gf_at_k_corrected_ci_high", _gf_ci(1)),
            ),
            shown and any(c.gf_at_k_corrected for c in cells),
        ),
    ]


def _labels(c: JudgedCell) -> str:
    return top_labels(c.labels, exclude=("plausible_followup",))


def results_table(cells: list[CellSummary]) -> Table:
    """The results table: one row per cell; on screen, perturbation and judge columns
    only when the run has more than one of them."""
    scored = [c for c in cells if isinstance(c, LikelihoodCell)]
    if scored and len(scored) == len(cells):
        return likelihood_table(scored)
    judged = [c for c in cells if isinstance(c, JudgedCell)]
    if any(isinstance(c, RolloutCell) for c in judged):
        return rollout_table(judged)
    cols = [
        _plain("model", "model"),
        _plain("dataset", "dataset"),
        _temperature(),
        Col(
            "perturbation",
            _text("perturbation"),
            (("perturbation", _attr("perturbation")),),
            any(c.perturbation != "none" for c in judged),
        ),
        Col(
            "judge",
            _text("judge"),
            (("judge", _attr("judge")),),
            len({c.judge for c in judged}) > 1,
        ),
        _plain("n", "n"),
        Col(
            "accuracy",
            _accuracy,
            (
                ("accuracy", _attr("accuracy")),
                ("answers", _attr("n_answers")),
                ("answers_truncated", _attr("answers_truncated")),
            ),
        ),
        _interval("genuine rate [95% CI]", RATE, RATE),
        Col(
            "corrected [95% CI]",
            _corrected,
            (
                ("corrected", _attr("rate_corrected")),
                ("corrected_ci_low", _attr("ci_corrected_low")),
                ("corrected_ci_high", _attr("ci_corrected_high")),
                ("judge_card", _attr("judge_card")),
                ("judge_card_sha", _attr("judge_card_sha")),
            ),
            bool(cards_used(judged)),
        ),
        *_gf_columns(judged),
        Col("unparseable", lambda c: str(c.failed), (("unparseable", _attr("failed")),)),
        Col("top failure labels", _labels, (("top_failure_labels", _labels),)),
    ]
    title = "genuine follow-up rate (user turns judged genuine)"
    return build("results", title, cols, judged)


LIKELIHOOD_V2 = {
    "PMI > 0 [95% CI]": ("pmi_share", True),
    "control PMI > 0": ("pmi_control_share", False),
    "PMI > 0, real - control": ("pmi_excess_share", True),
    "PMI mean, nats": ("pmi_mean", True),
    "role > 0 [95% CI]": ("role_share", True),
    "role mean, nats": ("role_mean", True),
    "role AUC vs opening": ("role_auc", True),
}
"""The version 2 measures: the cell field behind each column of the report's table, and
whether it has a CI (the shown text is the report's, so both read the same)."""


def _v2_columns() -> list[Col]:
    cols = []
    for header, _, show in LIKELIHOOD_MEASURE_COLUMNS:
        name, has_ci = LIKELIHOOD_V2[header]
        keys = (name, f"{name}_ci_low", f"{name}_ci_high") if has_ci else (name,)
        cols.append(Col(header, show, tuple((k, _attr(k)) for k in keys)))
    return cols


def likelihood_table(cells: list[LikelihoodCell]) -> Table:
    """Answer PMI and role contrast first; the old ranking stays as a secondary column."""
    cols = [
        _plain("model", "model"),
        _plain("dataset", "dataset"),
        _plain("perturbation", "perturbation"),
        _plain("contexts", "n", "contexts"),
        *_v2_columns(),
        Col(
            "ranking (secondary)",
            lambda c: pct_ci(c.preference_accuracy, c.preference_ci_low, c.preference_ci_high),
            (
                ("preferred", _attr("preference_accuracy")),
                ("preferred_ci_low", _attr("preference_ci_low")),
                ("preferred_ci_high", _attr("preference_ci_high")),
            ),
        ),
        Col(
            "margin",
            _margin,
            (
                ("margin", _attr("margin")),
                ("margin_ci_low", _attr("margin_ci_low")),
                ("margin_ci_high", _attr("margin_ci_high")),
            ),
            False,
        ),
    ]
    title = (
        "likelihood probe: answer PMI and role contrast of the real next turn [95% CI] "
        "(docs/probes.md); ranking: real turn preferred over every degenerate candidate"
    )
    return build("results", title, cols, cells)


def rollout_table(cells: Sequence[JudgedCell]) -> Table:
    cols = [
        _plain("model", "model"),
        _plain("dataset", "dataset"),
        _temperature(),
        _plain("turn", "turn"),
        _plain("n", "n"),
        _interval("genuine [95% CI]", RATE, RATE),
        Col(
            "survival [95% CI]",
            _survival,
            (*_interval("", SURVIVAL, SURVIVAL).data, ("survival_null", _attr("survival_null"))),
        ),
        Col("unparseable", lambda c: str(c.failed), (("unparseable", _attr("failed")),), False),
    ]
    rows = [c for c in cells if isinstance(c, RolloutCell)]
    return build("results", "rollouts: genuine rate and survival per turn", cols, rows)


def _survival(c: RolloutCell) -> str:
    """Survival with its null floor: what the judge reports if no turn is genuine."""
    text = pct_ci(c.survival, c.survival_ci_low, c.survival_ci_high)
    return text if c.survival_null is None else f"{text} null {c.survival_null:.1%}"


def _margin(c: LikelihoodCell) -> str:
    if c.margin is None or c.margin_ci_low is None or c.margin_ci_high is None:
        return "-"
    return f"{c.margin:+.2f} [{c.margin_ci_low:+.2f}, {c.margin_ci_high:+.2f}]"


def corrected_note(every: Sequence[CellBase]) -> str | None:
    """What the corrected column is, naming the cards it used; None when no cell has one."""
    cells = [c for c in every if isinstance(c, JudgedCell)]
    cards = cards_used(cells)
    if not cards:
        return None
    strata = strata_used(cells)
    where = f" for {'; '.join(strata)}" if strata else ""
    marked = (
        "; * the card has no reference turns from this model or dataset: error rates"
        " extrapolated, CI widened"
        if any(extrapolated(c) for c in cells)
        else ""
    )
    return (
        "corrected: the genuine rate with the judge's error rates for the run's strata"
        f" removed (Rogan-Gladen with judge card {', '.join(cards)}{where}; strata"
        " partially pooled; CI over items, the strata's reference turns and the spread"
        f" between strata){marked}; `userturn judge card --judge JUDGE` prints the card"
    )


def gf_note(every: Sequence[CellBase]) -> str | None:
    """What the GF@k columns are; None when no cell has k > 1 samples (no column)."""
    cells = [c for c in every if isinstance(c, GenerateCell) and _top_k(c) is not None]
    if not cells:
        return None
    corrected = (
        "; corrected: through the same error rates, CI over items and those rates"
        if any(c.gf_at_k_corrected for c in cells)
        else ""
    )
    return (
        "GF@k: the share of items with at least one genuine turn among k samples (each"
        " cell's largest k), as judged, beside its null floor: what a judge with the"
        " card's error rates reports when no turn is genuine (1 - sp^k); a judged value"
        f" near it is no evidence of genuine follow-ups{corrected} (docs/statistics.md)"
    )


def truncation_warning(cells: list[CellSummary]) -> str | None:
    """A warning when answers hit the answer token limit: a cut answer has no final
    answer, so accuracy counts it wrong, and its user turn follows a broken answer."""
    seen: dict[tuple[str, str, str], tuple[int, int]] = {}
    for c in cells:
        if isinstance(c, GenerateCell) and c.n_answers:
            seen[(c.model, c.dataset, c.config)] = (c.answers_truncated, c.n_answers)
    cut = sum(t for t, _ in seen.values())
    if not cut:
        return None
    total = sum(n for _, n in seen.values())
    return (
        f"warning: {cut} of {total} answers stopped at the answer token limit "
        "(--max-answer-tokens) before they ended; accuracy counts a cut answer as wrong "
        "and its user turn follows a broken answer: raise --max-answer-tokens"
    )
