"""The paper's figures from an :class:`~userturn.analysis.Analysis` (matplotlib, Agg).

Each figure is written as PNG (for the HTML report and quick looks) and SVG (for
papers). The Agg backend is forced so that report generation works on headless
machines and in CI; nothing here opens a window.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from userturn.analysis.tables import temp
from userturn.analysis.views import Analysis, LabelShares
from userturn.run.records import CellSummary
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


def _cells(a: Analysis, judge: str | None, perturbation: str = "none") -> list[CellSummary]:
    """The one-turn probe's cells of one judge and perturbation; with several configs in
    the run, each (model, config) is drawn as its own series."""
    several = len(a.configs) > 1
    return [
        replace(c, model=f"{c.model} [{c.config}]") if several else c
        for c in a.cells
        if c.judge == judge and c.perturbation == perturbation and c.probe == "generate"
    ]


def _models(rows: list[CellSummary]) -> list[str]:
    return list(dict.fromkeys(r.model for r in rows))


def rate_vs_temperature(a: Analysis, judge: str | None) -> Figure:
    """One panel per dataset: the rate per model across T, with its 95% CI as a band."""
    cells = _cells(a, judge)
    datasets = list(dict.fromkeys(c.dataset for c in cells)) or ["(no cells)"]
    fig, axes = plt.subplots(
        1, len(datasets), figsize=(4.2 * len(datasets), 3.6), squeeze=False, sharey=True
    )
    for ax, ds in zip(axes[0], datasets, strict=True):
        for i, model in enumerate(_models(cells)):
            pts = sorted(
                (
                    c
                    for c in cells
                    if c.dataset == ds
                    and c.model == model
                    and c.rate is not None
                    and c.temperature is not None
                ),
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
        ax.set_title(ds)
        ax.set_xlabel("user-turn temperature T")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("genuine follow-up rate")
    if axes[0][-1].get_legend_handles_labels()[0]:
        axes[0][-1].legend(fontsize=8, loc="upper left")
    fig.suptitle(f"Follow-up rate vs temperature (judge {judge}; bands: 95% CI)", fontsize=10)
    return fig


def accuracy_vs_followup(a: Analysis, judge: str | None) -> Figure:
    """Task accuracy (x) against follow-up rate (y) per (model, dataset), at min and max T."""
    cells = [c for c in _cells(a, judge) if c.accuracy is not None and c.rate is not None]
    temps = sorted({c.temperature for c in cells if c.temperature is not None})
    shown: list[float | None] = [temps[0], temps[-1]] if len(temps) > 1 else [*temps] or [None]
    fig, axes = plt.subplots(1, len(shown), figsize=(4.4 * len(shown), 3.8), squeeze=False)
    models, datasets = _models(cells), list(dict.fromkeys(c.dataset for c in cells))
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
        ax.set_title(f"T={t:g}" if t is not None else "no scored cells")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("genuine follow-up rate")
    handles, labels = axes[0][-1].get_legend_handles_labels()
    if handles:
        axes[0][-1].legend(handles, labels, fontsize=7, loc="upper right")
    fig.suptitle(f"Accuracy vs follow-up (judge {judge}, no perturbation)", fontsize=10)
    return fig


def failure_labels(a: Analysis, judge: str | None) -> Figure:
    """One stacked horizontal bar per model: label shares, unparseable in black."""
    rows = [r for r in a.labels_by_model if r.judge == judge]
    fig, ax = plt.subplots(figsize=(7.5, 0.7 * max(len(rows), 1) + 1.6))
    names = [r.group for r in rows]
    left = [0.0] * len(rows)
    for lab in (*LABELS, "unparseable"):
        vals = [_share(r, lab) for r in rows]
        if not any(vals):
            continue
        ax.barh(names, vals, left=left, color=LABEL_COLORS[lab], label=lab)
        left = [x + v for x, v in zip(left, vals, strict=True)]
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of judged user turns (all cells)")
    ax.invert_yaxis()
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=3)
    ax.set_title(f"Labels per model (judge {judge})", fontsize=10)
    return fig


def _share(r: LabelShares, label: str) -> float:
    """Share of all judgments (ok + not ok), so the bar shows unparseable too."""
    total = r.n + r.unparseable + r.errors
    if not total:
        return 0.0
    if label == "unparseable":
        return float(r.unparseable + r.errors) / float(total)
    return float(r.labels.get(label, 0)) / float(total)


def perturbation_deltas(a: Analysis, judge: str | None) -> Figure:
    """Dot-and-whisker: delta (perturbed - none) with its paired bootstrap CI, per cell."""
    rows = [r for r in a.deltas if r.judge == judge and r.delta is not None]
    perts = list(dict.fromkeys(r.perturbation for r in rows))
    fig, ax = plt.subplots(figsize=(7.5, 0.32 * max(len(rows), 1) + 1.8))
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
    if perts:
        ax.legend(fontsize=7, loc="lower right")
    ax.set_title(f"Perturbation deltas (judge {judge})", fontsize=10)
    return fig


def gf_at_k(a: Analysis, judge: str | None) -> Figure:
    """GF@k against k, one line per (model, T), one panel per dataset: how much awareness
    appears when the model gets k tries (the paper's "latent" awareness)."""
    cells = [c for c in _cells(a, judge) if c.gf_at_k and c.samples > 1]
    datasets = list(dict.fromkeys(c.dataset for c in cells)) or ["(no cells with k > 1)"]
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.2 * len(datasets), 3.6), squeeze=False)
    for ax, ds in zip(axes[0], datasets, strict=True):
        for i, c in enumerate(c for c in cells if c.dataset == ds):
            ks = sorted(c.gf_at_k or {})
            label = f"{c.model} T={temp(c.temperature)}"
            values = [(c.gf_at_k or {})[k] for k in ks]
            ax.plot(ks, values, marker=MARKERS[i % len(MARKERS)], label=label)
        ax.set_xscale("log", base=2)
        ax.set_title(ds)
        ax.set_xlabel("k (samples)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    axes[0][0].set_ylabel("GF@k: P(at least one genuine)")
    fig.suptitle(f"Genuine follow-up at k samples (judge {judge})", fontsize=10)
    return fig


def item_spread(a: Analysis, judge: str | None) -> Figure:
    """Histogram of per-item genuine rates, per (model, dataset) at the highest T."""
    cells = [c for c in _cells(a, judge) if c.item_rate_histogram and c.samples > 1]
    top: dict[tuple[str, str], CellSummary] = {}
    for c in cells:
        k = (c.model, c.dataset)
        if k not in top or (c.temperature or 0) > (top[k].temperature or 0):
            top[k] = c
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    edges = [i / 10 for i in range(11)]
    width = 0.1 / max(len(top), 1)
    for i, ((model, ds), c) in enumerate(top.items()):
        hist = c.item_rate_histogram or []
        xs = [edges[j] + i * width for j in range(len(hist))]
        ax.bar(
            xs, hist, width=width, align="edge", label=f"{model} · {ds} · T={temp(c.temperature)}"
        )
    ax.set_xlabel("per-item genuine rate")
    ax.set_ylabel("items")
    if top:
        ax.legend(fontsize=7)
    ax.set_title(f"How genuine turns spread over items (judge {judge}, highest T)", fontsize=10)
    return fig


def rollout_turns(a: Analysis, judge: str | None) -> Figure:
    """Rollouts: genuine rate and survival against the turn, per (model, dataset, T)."""
    cells = [c for c in a.cells if c.probe == "rollout" and c.judge == judge]
    series: dict[str, list[CellSummary]] = {}
    for c in cells:
        series.setdefault(f"{c.model} · {c.dataset} · T={temp(c.temperature)}", []).append(c)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
    for i, (name, pts) in enumerate(series.items()):
        pts.sort(key=lambda c: c.turn or 0)
        turns = [c.turn or 0 for c in pts]
        m = MARKERS[i % len(MARKERS)]
        axes[0].plot(turns, [c.rate or 0.0 for c in pts], marker=m, label=name)
        axes[1].plot(turns, [c.survival or 0.0 for c in pts], marker=m, label=name)
    titles = ("genuine rate at turn t", "survival: all genuine up to t")
    for ax, title in zip(axes, titles, strict=True):
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("user turn")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    if series:
        axes[1].legend(fontsize=7)
    fig.suptitle(f"Rollouts (judge {judge})", fontsize=10)
    return fig


PLOTS: dict[str, Callable[[Analysis, str | None], Figure]] = {
    "rate_vs_temperature": rate_vs_temperature,
    "accuracy_vs_followup": accuracy_vs_followup,
    "failure_labels": failure_labels,
    "perturbation_deltas": perturbation_deltas,
    "gf_at_k": gf_at_k,
    "item_spread": item_spread,
    "rollout_turns": rollout_turns,
}


def write_plots(a: Analysis, judge: str | None, folder: Path) -> dict[str, dict[str, Path]]:
    """Render every figure to ``folder/<name>.png`` and ``.svg``; returns the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, dict[str, Path]] = {}
    for name, make in PLOTS.items():
        fig = make(a, judge)
        try:
            fig.tight_layout()
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
