"""Intervals for cells, paired deltas and independent differences (analysis.intervals).

Run: ``.venv/bin/python -m pytest tests/analysis/test_intervals.py -q`` (~10 s).
The coverage tests are quick, seeded simulations with known truth (``coverage_sim``);
``bench/interval_coverage.py`` runs the same simulations at full size. References are
statsmodels and scipy, and textbook formulas recomputed here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from coverage_sim import Design, cell, coverage, independent, paired
from scipy import stats
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from userturn.analysis import intervals as I

SIMS = 150
REPS = 500
"""Bootstrap replicates in the coverage simulations (the bench uses the default 2000)."""
CLUSTERED = Design(items=20, k=4, rho=0.2)
SINGLE = Design(items=50, k=1)


@pytest.mark.parametrize(
    "counts", [(30, 100, 10, 100), (0, 20, 0, 20), (20, 20, 0, 7), (3, 9, 1, 40)]
)
def test_newcombe_closed_form_equals_statsmodels(counts: tuple[int, int, int, int]) -> None:
    ref = confint_proportions_2indep(*counts, method="newcomb", compare="diff")
    got = I.newcombe_diff(*counts)
    assert got == pytest.approx((float(ref[0]), float(ref[1])), abs=1e-12)


def test_t_quantile_matches_scipy() -> None:
    for df in [1, 2, 3, 4, 5, 9, 19, 49, 200, 5000]:
        assert I._t975(df) == pytest.approx(stats.t.ppf(0.975, df), rel=2e-3)


def test_intraclass_correlation_recovers_simulated_rho() -> None:
    rng = np.random.default_rng(3)
    for rho in [0.0, 0.3, 0.7]:
        per_item = cell(rng, 0.4, Design(items=2000, k=6, rho=rho))
        est = I.intraclass_correlation(per_item)
        assert est is not None and abs(est - rho) < 0.05, (rho, est)


def test_intraclass_correlation_is_unknown_without_variation_or_replication() -> None:
    assert I.intraclass_correlation([(0, 5)] * 10) is None
    assert I.intraclass_correlation([(5, 5)] * 10) is None
    assert I.intraclass_correlation([(1, 1), (0, 1), (1, 1)]) is None
    assert I.intraclass_correlation([(2, 4)]) is None


def test_effective_n_is_between_items_and_judgments() -> None:
    per_item = [(1, 4), (0, 3), (4, 4), (2, 4), (0, 2)]
    n = sum(x[1] for x in per_item)
    assert len(per_item) <= I.effective_n(per_item) <= n
    # No variation: the worst case, one observation's worth per (equal-sized) item.
    assert I.effective_n([(0, 5)] * 10) == pytest.approx(10)
    # Perfectly clustered items: ρ = 1.
    assert I.effective_n([(5, 5)] * 4 + [(0, 5)] * 6) == pytest.approx(10)
    assert I.effective_n([(1, 1), (0, 1)] * 5) == pytest.approx(10)


def test_single_sample_cells_use_wilson() -> None:
    per_item = [(1, 1)] * 7 + [(0, 1)] * 13 + [(0, 0)] * 3
    (lo, hi), method = I.rate_interval(per_item)
    ref = proportion_confint(7, 20, method="wilson")
    assert method == "wilson"
    assert (lo, hi) == pytest.approx((float(ref[0]), float(ref[1])), abs=1e-12)


@pytest.mark.parametrize("value", [0, 1])
def test_clustered_cells_never_collapse_at_the_boundaries(value: int) -> None:
    per_item = [(value * 4, 4)] * 30
    (lo, hi), method = I.rate_interval(per_item)
    assert method == "cluster-bootstrap+wilson-floor"
    assert lo is not None and hi is not None and hi - lo > 0.05
    assert lo <= value <= hi
    # At least as wide as Wilson with one observation per item.
    wlo, whi = proportion_confint(value * 30, 30, method="wilson")
    assert lo <= float(wlo) + 1e-12 and hi >= float(whi) - 1e-12


def test_clustered_interval_is_wider_than_treating_samples_as_independent() -> None:
    per_item = [(10, 10)] * 5 + [(0, 10)] * 5
    (lo, hi), _ = I.rate_interval(per_item)
    wlo, whi = proportion_confint(50, 100, method="wilson")
    assert lo is not None and hi is not None
    assert hi - lo > (whi - wlo) * 1.5


def test_intervals_are_deterministic_and_seeded() -> None:
    per_item = cell(np.random.default_rng(1), 0.3, CLUSTERED)
    assert I.rate_interval(per_item) == I.rate_interval(per_item)
    assert I.rate_interval(per_item, seed=1) != I.rate_interval(per_item, seed=2)


def test_bootstrap_blocks_resample_every_replicate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(I, "_CHUNK", 7)
    values = np.column_stack([np.arange(5.0), np.ones(5)])
    sums = I._resampled_sums(values, np.random.default_rng(0), 23)
    assert sums.shape == (23, 2)
    assert np.all(sums[:, 1] == 5) and np.all((sums[:, 0] >= 0) & (sums[:, 0] <= 20))


def test_old_entry_points_share_the_fixed_behaviour() -> None:
    a, b = paired(np.random.default_rng(2), 0.3, 0.3, CLUSTERED)
    assert I.cluster_bootstrap(a) == I.rate_interval(a)[0]
    assert I.paired_bootstrap_diff(a, b) == I.paired_diff_interval(a, b)[0]
    assert I.independent_bootstrap_diff(a, b) == I.independent_diff_interval(a, b)[0]
    zeros = [(0, 3)] * 8
    lo, hi = I.paired_bootstrap_diff(zeros, zeros)
    assert lo is not None and hi is not None and lo < 0 < hi


def _bonett_price_textbook(x: list[int], y: list[int]) -> tuple[float, float]:
    """Bonett & Price (2012) from the discordant counts of paired 0/1 outcomes."""
    n = len(x)
    b = sum(1 for u, v in zip(x, y, strict=True) if u and not v)
    c = sum(1 for u, v in zip(x, y, strict=True) if v and not u)
    p12, p21 = (b + 1) / (n + 2), (c + 1) / (n + 2)
    d = p12 - p21
    half = stats.norm.ppf(0.975) * math.sqrt((p12 + p21 - d * d) / (n + 2))
    return max(-1.0, d - half), min(1.0, d + half)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_single_sample_paired_delta_is_bonett_price(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, y = list(rng.integers(0, 2, 30)), list(rng.integers(0, 2, 30))
    (lo, hi), method = I.paired_diff_interval([(int(u), 1) for u in x], [(int(v), 1) for v in y])
    assert method == "bonett-price"
    assert (lo, hi) == pytest.approx(_bonett_price_textbook(x, y), abs=1e-12)


def test_identical_conditions_do_not_give_a_point() -> None:
    a = [(1, 3), (0, 3), (2, 3), (3, 3)] * 5
    (lo, hi), method = I.paired_diff_interval(a, a)
    assert method == "paired-cluster-bootstrap+bonett-price-floor"
    assert lo is not None and hi is not None and lo < 0 < hi
    (lo, hi), _ = I.paired_diff_interval([(0, 1)] * 20, [(0, 1)] * 20)
    assert lo is not None and hi is not None and lo < 0 < hi


def test_differences_are_undefined_without_judgments() -> None:
    assert I.paired_diff_interval([], [])[0] == (None, None)
    assert I.paired_diff_interval([(1, 2)], [(0, 2), (1, 1)])[0] == (None, None)
    assert I.paired_diff_interval([(0, 0)], [(1, 2)])[0] == (None, None)
    assert I.independent_diff_interval([(0, 0)], [(1, 2)])[0] == (None, None)
    assert I.rate_interval([(0, 0)])[0] == (None, None)


@pytest.mark.parametrize("design", [SINGLE, CLUSTERED], ids=["k1", "k4"])
@pytest.mark.parametrize("p", [0.0, 0.02, 0.5])
def test_cell_coverage(design: Design, p: float) -> None:
    got = coverage(lambda r: I.rate_interval(cell(r, p, design), reps=REPS)[0], p, SIMS, seed=11)
    assert got.degenerate == 0
    assert got.coverage >= (1.0 if p == 0 else 0.9), got
    if p == 0.5:
        assert got.coverage <= 0.99, got


def test_plain_cluster_bootstrap_would_fail_at_two_percent() -> None:
    """The regression this module fixes: the percentile bootstrap alone under-covers."""

    def plain(r: np.random.Generator) -> I.CI:
        arr = I._as_array(cell(r, 0.02, CLUSTERED))
        sums = I._resampled_sums(arr, np.random.default_rng(0), REPS)
        return I._percentile_ci(I._ratio(sums))

    assert coverage(plain, 0.02, SIMS, seed=11).coverage < 0.85


@pytest.mark.parametrize("design", [SINGLE, CLUSTERED], ids=["k1", "k4"])
@pytest.mark.parametrize(("pa", "pb"), [(0.0, 0.0), (0.02, 0.02), (0.5, 0.5), (0.05, 0.0)])
def test_paired_delta_coverage(design: Design, pa: float, pb: float) -> None:
    got = coverage(
        lambda r: I.paired_diff_interval(*paired(r, pa, pb, design), reps=REPS)[0],
        pa - pb,
        SIMS,
        seed=12,
    )
    assert got.degenerate == 0
    assert got.coverage >= 0.9, got
    if pa == 0.5:
        assert got.coverage <= 0.99, got


@pytest.mark.parametrize("design", [SINGLE, CLUSTERED], ids=["k1", "k4"])
@pytest.mark.parametrize(("pa", "pb"), [(0.0, 0.0), (0.02, 0.02), (0.5, 0.5), (0.05, 0.0)])
def test_independent_difference_coverage(design: Design, pa: float, pb: float) -> None:
    got = coverage(
        lambda r: I.independent_diff_interval(*independent(r, pa, pb, design), reps=REPS)[0],
        pa - pb,
        SIMS,
        seed=13,
    )
    assert got.degenerate == 0
    assert got.coverage >= 0.9, got
    if pa == 0.5:
        assert got.coverage <= 0.99, got
