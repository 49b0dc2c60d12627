"""Analysis on synthetic stores built with the real Store API (no model).

Run: ``.venv/bin/python -m pytest tests/test_analysis.py -q`` (a few seconds).
Expected numbers are recomputed here from the synthetic outcome functions, not read
back from userturn.analysis.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from contract import CELL_KEYS
from synthetic_runs import Spec, build_run, default_outcome
from userturn.analysis import cells as A
from userturn.analysis import intervals as I
from userturn.analysis import views as V
from userturn.rundir.store import Store


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_run(tmp_path_factory.mktemp("run"))


@pytest.fixture(scope="module")
def cells(run: Path) -> list[A.Cell]:
    store = Store(run / "store.sqlite")
    try:
        return A.collect_cells(store)
    finally:
        store.close()


def _find(cells: list[A.Cell], **key: object) -> A.Cell:
    hits = [c for c in cells if all(getattr(c, k) == v for k, v in key.items())]
    assert len(hits) == 1, key
    return hits[0]


def test_summary_json_has_contract_keys_and_one_cell_per_key(run: Path) -> None:
    summary = json.loads((run / "summary.json").read_text())["cells"]
    spec = Spec()
    assert len(summary) == len(spec.models) * len(spec.datasets) * len(spec.temps) * len(spec.perts)
    for cell in summary:
        assert CELL_KEYS <= set(cell)
    keys = {
        (c["model"], c["dataset"], c["temperature"], c["perturbation"], c["judge"]) for c in summary
    }
    assert len(keys) == len(summary)


def test_rate_excludes_unparseable_and_uses_wilson_at_t0(cells: list[A.Cell]) -> None:
    c = _find(cells, model="qwen-a", dataset="gsm8k", temperature=0.0, perturbation="none")
    spec = Spec()
    outs = [default_outcome("qwen-a", i, 0.0, 0, "none") for i in range(spec.items)]
    ok = [o for o in outs if o[0] == "ok"]
    k = sum(1 for o in ok if o[1])
    j = c.summary()
    assert (j.n_total, j.n, j.genuine) == (spec.items, len(ok), k)
    lo, hi = proportion_confint(k, len(ok), method="wilson")
    assert j.ci_method == "wilson"
    assert j.ci_low == pytest.approx(lo) and j.ci_high == pytest.approx(hi)


def test_k_samples_use_cluster_bootstrap_and_count_unparseable(cells: list[A.Cell]) -> None:
    c = _find(cells, model="smollm-b", dataset="chat", temperature=0.7, perturbation="none")
    outs = [default_outcome("smollm-b", i, 0.7, s, "none") for i in range(6) for s in range(3)]
    ok = [o for o in outs if o[0] == "ok"]
    j = c.summary()
    assert j.ci_method == "cluster-bootstrap+wilson-floor"
    assert j.unparseable == len(outs) - len(ok) == 1
    assert j.rate == pytest.approx(sum(1 for o in ok if o[1]) / len(ok))
    assert j.ci_low <= j.rate <= j.ci_high
    assert sum(j.labels.values()) == j.n


@pytest.mark.parametrize("n", [1, 2, 3, 7, 50, 1000])
def test_closed_form_wilson_equals_statsmodels(n: int) -> None:
    for k in range(n + 1):
        lo, hi = I.wilson(k, n)
        ref_lo, ref_hi = proportion_confint(k, n, alpha=0.05, method="wilson")
        assert lo == pytest.approx(float(ref_lo), abs=1e-12)
        assert hi == pytest.approx(float(ref_hi), abs=1e-12)
    assert I.wilson(0, 0) == (None, None)


def test_cluster_bootstrap_is_wider_than_wilson_for_clustered_data() -> None:
    # 10 items, each all-genuine or all-not over 10 samples: effective n is 10, not 100.
    per_item = [(10, 10)] * 5 + [(0, 10)] * 5
    lo, hi = I.cluster_bootstrap(per_item)
    wlo, whi = I.wilson(50, 100)
    assert lo is not None and hi is not None and wlo is not None and whi is not None
    assert hi - lo > (whi - wlo) * 1.5


def test_accuracy_is_per_distinct_answer(cells: list[A.Cell]) -> None:
    rows = {(r.model, r.dataset): r for r in V.accuracy_by_model_dataset(cells)}
    spec = Spec()
    r = rows[("llama-c", "gsm8k")]
    expected = [spec.correct("llama-c", i) for i in range(spec.items)]
    assert r.n_answers == spec.items and r.n_scored == spec.items
    assert r.accuracy == pytest.approx(sum(expected) / len(expected))
    assert r.answers_truncated == 1
    assert rows[("llama-c", "chat")].accuracy is None


def test_label_distribution_by_family_sums_cells(cells: list[A.Cell]) -> None:
    fam = {r.group: r for r in V.label_distribution(cells, "family")}
    qwen = fam["qwen"]
    mine = [c for c in cells if c.family == "qwen"]
    assert qwen.n == sum(c.n for c in mine)
    assert qwen.unparseable == sum(c.unparseable for c in mine)
    assert sum(qwen.shares.values()) == pytest.approx(1.0)
    assert "assistant_turn_restate" not in qwen.labels
    with pytest.raises(ValueError):
        V.label_distribution(cells, "dataset")


def test_perturbation_delta_is_paired_on_items(cells: list[A.Cell]) -> None:
    deltas = V.perturbation_deltas(cells)
    spec = Spec()
    assert len(deltas) == len(spec.models) * len(spec.datasets) * len(spec.temps)
    d = next(
        r for r in deltas if r.model == "qwen-a" and r.dataset == "gsm8k" and r.temperature == 0.0
    )
    base = _find(cells, model="qwen-a", dataset="gsm8k", temperature=0.0, perturbation="none")
    pert = _find(
        cells, model="qwen-a", dataset="gsm8k", temperature=0.0, perturbation="truncate:0.5"
    )
    assert d.delta == pytest.approx(pert.genuine / pert.n - base.genuine / base.n)
    assert d.ci_low <= d.delta <= d.ci_high
    assert d.n_items == spec.items
    assert d.ci_method == "bonett-price"  # one sample per item at T=0


def test_paired_diff_of_identical_conditions_is_not_a_point() -> None:
    a = [(1, 3), (0, 3), (2, 3), (3, 3)]
    for lo, hi in (I.paired_bootstrap_diff(a, a), I.independent_bootstrap_diff(a, a)):
        assert lo is not None and hi is not None and lo < 0 < hi
    lo, hi = I.independent_bootstrap_diff(a, a)
    assert lo is not None and hi is not None and lo < 0 < hi


def test_newcombe_matches_statsmodels_and_handles_empty() -> None:
    lo, hi = I.newcombe_diff(30, 100, 10, 100)
    assert lo is not None and hi is not None and 0 < lo < 0.2 < hi
    assert I.newcombe_diff(1, 0, 1, 5) == (None, None)


def test_correlation_against_scipy_and_undefined_cases() -> None:
    xs, ys = [0.1, 0.5, 0.9, 0.3], [0.0, 0.2, 0.1, 0.4]
    got = V.correlation(xs, ys)
    assert got["pearson_r"] == pytest.approx(stats.pearsonr(xs, ys)[0])
    assert got["spearman_rho"] == pytest.approx(stats.spearmanr(xs, ys)[0])
    assert V.correlation([0.1, 0.2], [0.3, 0.4])["pearson_r"] is None
    flat = V.correlation([0.5, 0.5, 0.5], [0.1, 0.2, 0.3])
    assert flat["pearson_r"] is None and "constant" in flat["note"]


def test_accuracy_followup_correlation_across_models(cells: list[A.Cell]) -> None:
    rows = V.accuracy_followup_correlation(cells)
    assert all(r.scope != "all datasets" for r in rows)  # never pooled across datasets
    pooled = next(r for r in rows if r.temperature == 0.7 and r.scope == "gsm8k")
    # only gsm8k is scored: one point per model
    assert pooled.n_points == 3
    assert pooled.rho_ci_low is not None and pooled.rho_ci_high is not None
    assert pooled.rho_ci_low <= pooled.rho_ci_high
    assert pooled.equivalence in ("|rho| < 0.3 with 95% confidence", "not shown")
    pts = pooled.points
    assert pooled.pearson_r == pytest.approx(
        stats.pearsonr([p["accuracy"] for p in pts], [p["rate"] for p in pts])[0]
    )


def test_unjudged_turns_count_in_n_total_only(tmp_path: Path) -> None:
    spec = Spec(
        models={"m": "other"},
        datasets=("gsm8k",),
        items=2,
        temps=(0.0,),
        perts=("none",),
        judges=(),
    )
    build_run(tmp_path, spec, write=False)
    store = Store(tmp_path / "store.sqlite")
    try:
        (cell,) = A.summary_cells(store)
    finally:
        store.close()
    assert cell.judge is None and cell.n_total == 2 and cell.n == 0
    assert cell.rate is None and cell.ci_low is None


def test_top_labels_orders_by_count() -> None:
    labels = {"a": 1, "plausible_followup": 5, "b": 4}
    assert A.top_labels(labels, exclude=("plausible_followup",)) == "b 40%, a 10%"
    assert A.top_labels({}) == ""


def test_item_level_correlation_is_defined_with_two_models(tmp_path: Path) -> None:
    spec = Spec(
        models={"m1": "x", "m2": "y"},
        datasets=("gsm8k",),
        items=6,
        temps=(0.7,),
        perts=("none",),
        outcome=lambda m, i, t, s, p: ("ok", (i + s) % 2 == 0, "other"),
        correct=lambda m, i: i % 2 == 0,
    )
    build_run(tmp_path, spec, write=False)
    store = Store(tmp_path / "store.sqlite")
    try:
        rows = V.accuracy_followup_correlation(A.collect_cells(store))
    finally:
        store.close()
    pooled = next(r for r in rows if r.scope == "gsm8k")
    assert pooled.pearson_r is None and pooled.n_points == 2
    assert pooled.equivalence.startswith("not shown")
    items = next(r for r in rows if r.scope == "items: gsm8k")
    assert items.n_points == 12
    # item rates: even items 2/3, odd items 1/3; correct = even -> positive correlation
    xs = [float(i % 2 == 0) for _ in range(2) for i in range(6)]
    ys = [(2 if i % 2 == 0 else 1) / 3 for _ in range(2) for i in range(6)]
    assert items.pearson_r == pytest.approx(stats.pearsonr(xs, ys)[0])
