"""Plots: every figure renders to a real PNG and a well-formed SVG (matplotlib Agg).

Run: ``.venv/bin/python -m pytest tests/test_plots.py -q`` (about 10 s, no model).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pytest

from synthetic_runs import Spec, build_run
from userturn.analysis import plots
from userturn.analysis.views import Analysis, analyze
from userturn.run.store import Store


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
    assert set(out) == set(plots.PLOTS)
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


def test_plots_survive_a_run_without_scores_or_perturbations(tmp_path: Path) -> None:
    spec = Spec(
        models={"only": "other"}, datasets=("chat",), items=2, temps=(0.0,), perts=("none",)
    )
    a = _analyze(build_run(tmp_path / "run", spec, write=False))
    for name, make in plots.PLOTS.items():
        fig = make(a, "rules")
        fig.tight_layout()
        fig.canvas.draw()
        assert fig.axes, name
        plots.plt.close(fig)
