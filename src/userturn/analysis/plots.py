"""The paper's figures from an :class:`~userturn.analysis.Analysis` (matplotlib, Agg).

Each figure is written as PNG (for the HTML report and quick looks) and SVG (for
papers). The Agg backend is forced so that report generation works on headless
machines and in CI; nothing here opens a window.

A figure is drawn only when the run has data for it (:func:`available`): an empty
axis tells a reader nothing and looks like a bug. Figures use matplotlib's
constrained layout with legends placed outside the axes, so no title, tick label or
legend is clipped or drawn over another label (``tests/test_plots.py`` checks every
text's extent on the rendered canvas).
"""

from __future__ import annotations

import logging
import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from userturn.analysis.cell import GenerateCell, LikelihoodCell, RolloutCell
from userturn.analysis.tables import temp
from userturn.analysis.views import Analysis, LabelShares
from userturn.types import LABELS

log = logging.getLogger(__name__)

LABEL_COLORS = {
    "plausible_followup": "#2ca02c",
    "previous_turn_restate": "#1f77b4",
    "assistant_turn_restate": "#ff7f0e",
    "meta_planning": "#9467bd",
    "new_task_prompt": "#8c564b",
    "malformed_artifact": "#d62728",
    "degenerate_short": "#7f7f7f",
    "other": "#bcbd22",
    "unparseable": "#000000",
}
MARKERS = "osD^vP*Xh<>"
LEGEND_ROW_IN = 0.24
"""Height (inches) one row of a legend below the axes takes, added to the figure."""


def _cells(a: Analysis, judge: str | None, perturbation: str = "none") -> list[GenerateCell]:
    """The one-turn probe's cells of one judge and perturbation; with several configs in
    the run, each (model, config) is drawn as its own series."""
    several = len(a.configs) > 1
    return [
        replace(c, model=f"{c.model} [{c.config}]") if several else c
        for c in a.cells
        if isinstance(c, GenerateCell) and c.judge == judge and c.perturbation == perturbation
    ]


def _models(rows: list[GenerateCell]) -> list[str]:
    return list(dict.fromkeys(r.model for r in rows))


CHAR_IN = 0.075
"""Width (inches) of one character of legend text at font size 8, with some slack."""
HANDLE_IN = 0.6
"""Width of a legend entry's marker and padding."""


def _legend_cols(labels: list[str], width_in: float) -> int:
    """As many columns as the longest entry allows across the figure's width."""
    if not labels:
        return 1
    entry = HANDLE_IN + CHAR_IN * max(len(s) for s in labels)
    return max(1, min(len(labels), int((width_in - 0.2) // entry)))


def _figure(width: float, height: float, legend: list[str] | None = None) -> tuple[Figure, int]:
    """A constrained-layout figure, taller by the rows its legend below the axes needs,
    and wide enough for the legend's longest entry."""
    labels = legend or []
    if labels:
        width = max(width, HANDLE_IN + CHAR_IN * max(len(s) for s in labels) + 0.4)
    ncol = _legend_cols(labels, width)
    rows = math.ceil(len(labels) / ncol) if labels else 0
    fig = plt.figure(figsize=(width, height + LEGEND_ROW_IN * rows), layout="constrained")
    return fig, ncol


def _legend_below(fig: Figure, ax: Axes, ncol: int) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize=8)


def _title(fig: Figure, text: str) -> None:
    """A figure title wrapped to the figure's width (a long judge spec must not clip)."""
    chars = max(20, int(fig.get_figwidth() * 72 / (0.6 * 10)))
    fig.suptitle("\n".join(textwrap.wrap(text, chars)), fontsize=10)


def _judge_note(judge: str | None) -> str:
    return f"judge {judge}" if judge else "no judge"


def _temps(cells: list[GenerateCell]) -> list[float]:
    return sorted({c.temperature for c in cells if c.temperature is not None})


def has_rate_vs_temperature(a: Analysis, judge: str | None) -> bool:
    """A line needs two temperatures; one is a point the tables already show."""
    return len(_temps([c for c in _cells(a, judge) if c.rate is not None])) > 1


def rate_vs_temperature(a: Analysis, judge: str | None) -> Figure:
    """One panel per dataset: the rate per model across T, with its 95% CI as a band."""
    cells = [c for c in _cells(a, judge) if c.rate is not None and c.temperature is not None]
    datasets = list(dict.fromkeys(c.dataset for c in cells)) or ["(no cells)"]
    models = _models(cells)
    fig, ncol = _figure(4.2 * len(datasets) + 0.6, 3.6, models)
    axes = fig.subplots(1, len(datasets), squeeze=False, sharey=True)
    for ax, ds in zip(axes[0], datasets, strict=True):
        for i, model in enumerate(models):
            pts = sorted(
                (c for c in cells if c.dataset == ds and c.model == model),
                key=lambda c: c.temperature or 0.0,
            )
            if not pts:
                continue
            t = [c.temperature or 0.0 for c in pts]
            rates = [c.rate or 0.0 for c in pts]
            line = ax.plot(t, rates, marker=MARKERS[i % len(MARKERS)], label=model)[0]
            lo = [c.ci_low if c.ci_low is not None else r for c, r in zip(pts, rates, strict=True)]
            hi = [
                c.ci_high if c.ci_high is not None else r for c, r in zip(pts, rates, strict=True)
            ]
            ax.fill_between(t, lo, hi, alpha=0.18, color=line.get_color())
        ax.set_title(ds, fontsize=9)
        ax.set_xlabel("user-turn temperature T")
        ax.set_xticks(_temps(cells))
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("genuine follow-up rate")
    _legend_below(fig, axes[0][0], ncol)
    _title(fig, f"Follow-up rate vs temperature ({_judge_note(judge)}; bands: 95% CI)")
    return fig


def has_accuracy_vs_followup(a: Analysis, judge: str | None) -> bool:
    return any(c.accuracy is not None and c.rate is not None for c in _cells(a, judge))


def accuracy_vs_followup(a: Analysis, judge: str | None) -> Figure:
    """Task accuracy (x) against follow-up rate (y) per (model, dataset), at min and max T."""
    cells = [c for c in _cells(a, judge) if c.accuracy is not None and c.rate is not None]
    temps = _temps(cells)
    shown: list[float | None] = [temps[0], temps[-1]] if len(temps) > 1 else [*temps] or [None]
    models, datasets = _models(cells), list(dict.fromkeys(c.dataset for c in cells))
    series = list(dict.fromkeys(f"{c.model} · {c.dataset}" for c in cells))
    fig, ncol = _figure(4.4 * len(shown) + 0.6, 3.8, series)
    axes = fig.subplots(1, len(shown), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, t in zip(axes[0], shown, strict=True):
        for c in (c for c in cells if c.temperature == t):
            mi, di = models.index(c.model), datasets.index(c.dataset)
            ax.scatter(
                c.accuracy,
                c.rate,
                color=colors[mi % len(colors)],
                marker=MARKERS[di % len(MARKERS)],
                s=50,
                label=f"{c.model} · {c.dataset}",
            )
        ax.set_xlim(-0.03, 1.03)
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlabel("task accuracy")
        ax.set_title(f"T={t:g}" if t is not None else "no scored cells", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("genuine follow-up rate")
    _legend_below(fig, axes[0][0], ncol)
    _title(fig, f"Accuracy vs follow-up ({_judge_note(judge)}, no perturbation)")
    return fig


def _label_rows(a: Analysis, judge: str | None) -> list[LabelShares]:
    return [r for r in a.labels_by_model if r.judge == judge and r.n_total > 0]


def has_failure_labels(a: Analysis, judge: str | None) -> bool:
    return judge is not None and bool(_label_rows(a, judge))


def failure_labels(a: Analysis, judge: str | None) -> Figure:
    """One stacked horizontal bar per model: label shares, unparseable in black."""
    rows = _label_rows(a, judge)
    present = [lab for lab in (*LABELS, "unparseable") if any(_share(r, lab) for r in rows)]
    fig, ncol = _figure(8.0, 0.5 * max(len(rows), 1) + 1.5, present)
    ax = fig.subplots()
    names = [r.group for r in rows]
    left = [0.0] * len(rows)
    for lab in present:
        vals = [_share(r, lab) for r in rows]
        ax.barh(names, vals, left=left, color=LABEL_COLORS[lab], label=lab)
        left = [x + v for x, v in zip(left, vals, strict=True)]
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of judged user turns (all cells)")
    ax.invert_yaxis()
    _legend_below(fig, ax, ncol)
    _title(fig, f"Labels per model ({_judge_note(judge)})")
    return fig


def _share(r: LabelShares, label: str) -> float:
    """Share of all judgments (ok + not ok), so the bar shows unparseable too."""
    total = r.n + r.unparseable + r.errors
    if not total:
        return 0.0
    if label == "unparseable":
        return float(r.unparseable + r.errors) / float(total)
    return float(r.labels.get(label, 0)) / float(total)


def has_perturbation_deltas(a: Analysis, judge: str | None) -> bool:
    return any(r.judge == judge and r.delta is not None for r in a.deltas)


def perturbation_deltas(a: Analysis, judge: str | None) -> Figure:
    """Dot-and-whisker: delta (perturbed - none) with its paired bootstrap CI, per cell."""
    rows = [r for r in a.deltas if r.judge == judge and r.delta is not None]
    perts = list(dict.fromkeys(r.perturbation for r in rows))
    fig, ncol = _figure(8.0, 0.3 * max(len(rows), 1) + 1.6, perts)
    ax = fig.subplots()
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for y, r in enumerate(rows):
        color = colors[perts.index(r.perturbation) % len(colors)]
        delta = r.delta or 0.0
        lo = r.ci_low if r.ci_low is not None else delta
        hi = r.ci_high if r.ci_high is not None else delta
        ax.plot([lo, hi], [y, y], color=color, lw=2, alpha=0.6)
        ax.plot(delta, y, "o", color=color)
    ax.set_yticks(
        range(len(rows)),
        [f"{r.model} · {r.dataset} · T={temp(r.temperature)}" for r in rows],
        fontsize=7,
    )
    for i, p in enumerate(perts):
        ax.plot([], [], "o-", color=colors[i % len(colors)], label=p)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_xlim(-1.05, 1.05)
    ax.invert_yaxis()
    ax.set_xlabel("rate(perturbed) - rate(none), 95% paired bootstrap CI")
    _legend_below(fig, ax, ncol)
    _title(fig, f"Perturbation deltas ({_judge_note(judge)})")
    return fig


def _k_cells(a: Analysis, judge: str | None) -> list[GenerateCell]:
    return [c for c in _cells(a, judge) if c.gf_at_k and c.samples > 1]


def has_gf_at_k(a: Analysis, judge: str | None) -> bool:
    return bool(_k_cells(a, judge))


def gf_at_k(a: Analysis, judge: str | None) -> Figure:
    """GF@k against k, one line per (model, T), one panel per dataset: how much awareness
    appears when the model gets k tries (the paper's "latent" awareness)."""
    cells = _k_cells(a, judge)
    datasets = list(dict.fromkeys(c.dataset for c in cells)) or ["(no cells with k > 1)"]
    per_panel = [[_gf_label(c) for c in cells if c.dataset == ds] for ds in datasets]
    fig, ncol = _figure(4.2 * len(datasets) + 0.6, 3.6, max(per_panel, key=len))
    axes = fig.subplots(1, len(datasets), squeeze=False, sharey=True)
    ks_all = sorted({k for c in cells for k in c.gf_at_k or {}})
    for ax, ds in zip(axes[0], datasets, strict=True):
        for i, c in enumerate(c for c in cells if c.dataset == ds):
            ks = sorted(c.gf_at_k or {})
            label = _gf_label(c)
            values = [(c.gf_at_k or {})[k] for k in ks]
            ax.plot(ks, values, marker=MARKERS[i % len(MARKERS)], label=label)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks_all, [str(k) for k in ks_all])
        ax.minorticks_off()
        ax.set_title(ds, fontsize=9)
        ax.set_xlabel("k (samples)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("GF@k: P(≥1 genuine)")
    widest = max(axes[0], key=lambda ax: len(ax.get_legend_handles_labels()[0]))
    _legend_below(fig, widest, ncol)
    _title(fig, f"Genuine follow-up at k samples ({_judge_note(judge)})")
    return fig


def _gf_label(c: GenerateCell) -> str:
    return f"{c.model} T={temp(c.temperature)}"


def _spread_cells(a: Analysis, judge: str | None) -> dict[tuple[str, str], GenerateCell]:
    top: dict[tuple[str, str], GenerateCell] = {}
    for c in _cells(a, judge):
        if not (c.item_rate_histogram and c.samples > 1):
            continue
        k = (c.model, c.dataset)
        if k not in top or (c.temperature or 0) > (top[k].temperature or 0):
            top[k] = c
    return top


def has_item_spread(a: Analysis, judge: str | None) -> bool:
    return bool(_spread_cells(a, judge))


def item_spread(a: Analysis, judge: str | None) -> Figure:
    """Histogram of per-item genuine rates, per (model, dataset) at the highest T."""
    top = _spread_cells(a, judge)
    labels = [f"{m} · {ds} · T={temp(c.temperature)}" for (m, ds), c in top.items()]
    fig, ncol = _figure(8.0, 3.6, labels)
    ax = fig.subplots()
    edges = [i / 10 for i in range(11)]
    width = 0.1 / max(len(top), 1)
    for i, (c, label) in enumerate(zip(top.values(), labels, strict=True)):
        hist = c.item_rate_histogram or []
        xs = [edges[j] + i * width for j in range(len(hist))]
        ax.bar(xs, hist, width=width, align="edge", label=label)
    ax.set_xlim(0, 1)
    ax.set_xlabel("per-item genuine rate")
    ax.set_ylabel("items")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    _legend_below(fig, ax, ncol)
    _title(fig, f"How genuine turns spread over items ({_judge_note(judge)}, highest T)")
    return fig


def _rollout_cells(a: Analysis, judge: str | None) -> list[RolloutCell]:
    return [c for c in a.cells if isinstance(c, RolloutCell) and c.judge == judge and c.turn]


def has_rollout_turns(a: Analysis, judge: str | None) -> bool:
    return bool(_rollout_cells(a, judge))


def rollout_turns(a: Analysis, judge: str | None) -> Figure:
    """Rollouts: genuine rate and survival against the turn, per (model, dataset, T)."""
    series: dict[str, list[RolloutCell]] = {}
    for c in _rollout_cells(a, judge):
        series.setdefault(f"{c.model} · {c.dataset} · T={temp(c.temperature)}", []).append(c)
    fig, ncol = _figure(9.0, 3.6, list(series))
    axes = fig.subplots(1, 2, sharey=True)
    turns_all = sorted({c.turn or 0 for pts in series.values() for c in pts})
    for i, (name, pts) in enumerate(series.items()):
        pts.sort(key=lambda c: c.turn or 0)
        turns = [c.turn or 0 for c in pts]
        m = MARKERS[i % len(MARKERS)]
        axes[0].plot(turns, [c.rate or 0.0 for c in pts], marker=m, label=name)
        axes[1].plot(turns, [c.survival or 0.0 for c in pts], marker=m)
    titles = ("genuine rate at turn t", "survival: all genuine up to t")
    for ax, title in zip(axes, titles, strict=True):
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("user turn")
        ax.set_xticks(turns_all)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("share of conversations")
    _legend_below(fig, axes[0], ncol)
    _title(fig, f"Rollouts ({_judge_note(judge)})")
    return fig


def _likelihood_cells(a: Analysis) -> list[LikelihoodCell]:
    return [
        c for c in a.cells if isinstance(c, LikelihoodCell) and c.preference_accuracy is not None
    ]


def has_likelihood(a: Analysis, judge: str | None) -> bool:
    return bool(_likelihood_cells(a))


def likelihood(a: Analysis, judge: str | None) -> Figure:
    """The likelihood probe per (model, dataset, perturbation): how often the real next
    turn beats every degenerate one, and by how much (nats/token), with 95% CIs."""
    cells = _likelihood_cells(a)
    names = [
        f"{c.model} · {c.dataset}" + ("" if c.perturbation == "none" else f" · {c.perturbation}")
        for c in cells
    ]
    fig, _ = _figure(9.0, 0.35 * len(cells) + 1.6)
    axes = fig.subplots(1, 2, sharey=True)
    ys = list(range(len(cells)))
    for y, c in zip(ys, cells, strict=True):
        p = c.preference_accuracy or 0.0
        lo = c.preference_ci_low if c.preference_ci_low is not None else p
        hi = c.preference_ci_high if c.preference_ci_high is not None else p
        axes[0].plot([lo, hi], [y, y], color="C0", lw=2, alpha=0.6)
        axes[0].plot(p, y, "o", color="C0")
        if c.margin is not None:
            mlo = c.margin_ci_low if c.margin_ci_low is not None else c.margin
            mhi = c.margin_ci_high if c.margin_ci_high is not None else c.margin
            axes[1].plot([mlo, mhi], [y, y], color="C1", lw=2, alpha=0.6)
            axes[1].plot(c.margin, y, "o", color="C1")
    axes[0].set_yticks(ys, names, fontsize=7)
    axes[0].invert_yaxis()
    axes[0].set_xlim(-0.03, 1.03)
    axes[0].set_xlabel("real turn preferred (share of contexts)")
    axes[1].axvline(0, color="k", lw=0.8)
    axes[1].set_xlabel("margin, nats/token (real - best degenerate)")
    for ax in axes:
        ax.grid(alpha=0.3)
    _title(fig, "Likelihood probe: the real next user turn vs degenerate ones (95% CI)")
    return fig


@dataclass(frozen=True)
class Plot:
    make: Callable[[Analysis, str | None], Figure]
    has_data: Callable[[Analysis, str | None], bool]
    """Whether the run has anything for this figure (otherwise it is not drawn)."""


PLOTS: dict[str, Plot] = {
    "rate_vs_temperature": Plot(rate_vs_temperature, has_rate_vs_temperature),
    "accuracy_vs_followup": Plot(accuracy_vs_followup, has_accuracy_vs_followup),
    "failure_labels": Plot(failure_labels, has_failure_labels),
    "perturbation_deltas": Plot(perturbation_deltas, has_perturbation_deltas),
    "gf_at_k": Plot(gf_at_k, has_gf_at_k),
    "item_spread": Plot(item_spread, has_item_spread),
    "rollout_turns": Plot(rollout_turns, has_rollout_turns),
    "likelihood": Plot(likelihood, has_likelihood),
}


def available(a: Analysis, judge: str | None) -> list[str]:
    """The figures this run has data for, in report order."""
    return [name for name, p in PLOTS.items() if p.has_data(a, judge)]


def write_plots(a: Analysis, judge: str | None, folder: Path) -> dict[str, dict[str, Path]]:
    """Render the figures the run has data for to ``folder/<name>.png`` and ``.svg``."""
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, dict[str, Path]] = {}
    for name in available(a, judge):
        fig = PLOTS[name].make(a, judge)
        try:
            out[name] = {}
            for ext in ("png", "svg"):
                path = folder / f"{name}.{ext}"
                fig.savefig(
                    path,
                    dpi=120 if ext == "png" else None,
                    metadata={"Date": None} if ext == "svg" else None,
                )
                out[name][ext] = path
        finally:
            plt.close(fig)
        log.info("wrote %s", folder / name)
    return out
