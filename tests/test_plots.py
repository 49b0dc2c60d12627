"""Plots: every figure renders to a real PNG and a well-formed SVG (matplotlib Agg), only
when the run has data for it, and legibly: no text outside the canvas, no legend over a
label, integer axes with integer ticks (checked on the drawn canvas).

Run: ``.venv/bin/python -m pytest tests/test_plots.py -q`` (about 20 s, no model).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from synthetic_runs import Spec, build_run
from userturn.analysis import plots
from userturn.analysis.views import Analysis, analyze
from userturn.rundir.store import Store


def _analyze(run: Path) -> Analysis:
    store = Store(run / "store.sqlite")
    try:
        return analyze(store)
    finally:
        store.close()


@pytest.fixture(scope="module")
def analysis(tmp_path_factory: pytest.TempPathFactory) -> Analysis:
    return _analyze(build_run(tmp_path_factory.mktemp("run"), write=False))


def test_write_plots_makes_png_and_svg_for_every_figure(analysis: Analysis, tmp_path: Path) -> None:
    out = plots.write_plots(analysis, "rules", tmp_path)
    assert set(out) == set(plots.PLOTS) - {"likelihood", "rollout_turns"}  # neither probe ran
    for paths in out.values():
        img = mpimg.imread(paths["png"])
        assert img.shape[0] > 200 and img.shape[1] > 300
        assert np.std(img) > 0.01  # not a blank canvas
        root = ET.parse(paths["svg"]).getroot()
        assert root.tag.endswith("svg")


def test_rate_vs_temperature_has_one_line_and_band_per_model(analysis: Analysis) -> None:
    fig = plots.rate_vs_temperature(analysis, "rules")
    spec = Spec()
    axes = fig.axes
    assert len(axes) == len(spec.datasets)
    assert len(axes[0].lines) == len(spec.models)
    assert len(axes[0].collections) == len(spec.models)  # CI bands
    xs = axes[0].lines[0].get_xdata()
    assert list(xs) == list(spec.temps)


def test_failure_labels_bars_sum_to_one(analysis: Analysis) -> None:
    fig = plots.failure_labels(analysis, "rules")
    ax = fig.axes[0]
    widths: dict[float, float] = {}
    for patch in ax.patches:
        y = round(patch.get_y(), 3)
        widths[y] = widths.get(y, 0.0) + patch.get_width()
    assert len(widths) == len(Spec().models)
    assert all(w == pytest.approx(1.0) for w in widths.values())


def test_a_plain_run_draws_only_the_plots_it_has_data_for(tmp_path: Path) -> None:
    """One temperature, one sample, no perturbation, no scores: no rate-vs-T line, no
    GF@k, no spread, no deltas, no rollouts, no likelihoods, no accuracy axis."""
    spec = Spec(
        models={"only": "other"},
        datasets=("chat",),
        items=2,
        temps=(0.0,),
        perts=("none",),
        correct=lambda m, i: None,  # type: ignore[arg-type,return-value]
    )
    a = _analyze(build_run(tmp_path / "run", spec, write=False))
    assert plots.available(a, "rules") == ["failure_labels"]
    out = plots.write_plots(a, "rules", tmp_path / "plots")
    assert set(out) == {"failure_labels"}
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == [
        "failure_labels.png",
        "failure_labels.svg",
    ]
    assert plots.available(a, None) == []  # an unjudged run: nothing to draw


def test_a_scored_run_at_one_temperature_has_no_temperature_axis(tmp_path: Path) -> None:
    spec = Spec(temps=(0.0,), perts=("none",), k=1)
    a = _analyze(build_run(tmp_path / "run", spec, write=False))
    assert plots.available(a, "rules") == ["accuracy_vs_followup", "failure_labels"]


def _overlaps(a: Bbox, b: Bbox) -> bool:
    return a.x0 < b.x1 - 1 and b.x0 < a.x1 - 1 and a.y0 < b.y1 - 1 and b.y0 < a.y1 - 1


def legibility_problems(fig: Figure) -> list[str]:
    """Text drawn outside the canvas, and legends drawn over an axis's labels or title."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    canvas = fig.bbox.padded(1)
    problems = []
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    boxes = [(f"axes {i}", ax.get_tightbbox(r)) for i, ax in enumerate(fig.axes)]
    boxes += [(f"legend {i}", lg.get_window_extent(r)) for i, lg in enumerate(legends)]
    if fig._suptitle is not None:  # type: ignore[attr-defined]
        boxes.append(("suptitle", fig._suptitle.get_window_extent(r)))  # type: ignore[attr-defined]
    for name, bb in boxes:
        if bb is not None and not (canvas.contains(bb.x0, bb.y0) and canvas.contains(bb.x1, bb.y1)):
            problems.append(f"{name} clipped: {bb.bounds} outside {fig.bbox.bounds}")
    for i, lg in enumerate(legends):
        lb = lg.get_window_extent(r)
        for j, ax in enumerate(fig.axes):
            for part, bb in (
                ("x axis", ax.xaxis.get_tightbbox(r)),
                ("y axis", ax.yaxis.get_tightbbox(r)),
                ("title", ax.title.get_window_extent(r) if ax.get_title() else None),
            ):
                if bb is not None and _overlaps(lb, bb):
                    problems.append(f"legend {i} covers the {part} of axes {j}")
    return problems


def _integer_ticks(values: list[float]) -> bool:
    return all(float(v).is_integer() for v in values)


def test_every_plot_is_legible_with_long_names_and_many_series(tmp_path: Path) -> None:
    """Long model names, six models, three datasets, a long judge spec: every figure's
    text stays on the canvas and no legend covers a label."""
    models = {f"org/very-long-model-name-{i}-instruct-2407-q4_k_m": "fam" for i in range(6)}
    spec = Spec(models=models, datasets=("gsm8k", "chat", "mtbench"), items=4)
    judge = "openai:http://127.0.0.1:8080/v1?model=a-long-judge-model-name&temperature=0"
    a = _analyze(build_run(tmp_path / "run", replace(spec, judges=(judge,)), write=False))
    other_probes = ("rollout_turns", "likelihood")
    assert plots.available(a, judge) == [n for n in plots.PLOTS if n not in other_probes]
    for name in plots.available(a, judge):
        fig = plots.PLOTS[name].make(a, judge)
        try:
            assert legibility_problems(fig) == [], name
        finally:
            plots.plt.close(fig)


def test_integer_axes_get_integer_ticks(analysis: Analysis) -> None:
    fig = plots.item_spread(analysis, "rules")
    assert _integer_ticks(list(fig.axes[0].get_yticks()))
    plots.plt.close(fig)
    fig = plots.gf_at_k(analysis, "rules")
    ks = sorted({k for c in analysis.cells if c.gf_at_k for k in c.gf_at_k})
    assert list(fig.axes[0].get_xticks()) == ks
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == [str(k) for k in ks]
    plots.plt.close(fig)
