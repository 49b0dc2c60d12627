"""Confidence intervals for follow-up rates and their differences.

Why a module of its own: every number userturn prints carries an interval, and the
interval is where a measurement tool is most easily wrong (samples of one context are
correlated; bootstrap intervals collapse at 0% and 100%). Keeping every interval here,
as pure functions over per-item counts, makes them testable by simulation.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

BOOTSTRAP_REPS = 2000
CI = tuple[float | None, float | None]
ItemCounts = list[tuple[int, int]]
"""Per item: (genuine, ok judgments)."""


_Z95 = NormalDist().inv_cdf(0.975)


def wilson(k: int, n: int) -> CI:
    """Wilson score 95% interval, in closed form.

    The same numbers as ``statsmodels``' ``proportion_confint(method="wilson")`` (tested to
    1e-12 on every k of several n), written out because importing statsmodels (and the
    scipy.stats and pandas it pulls in) costs ~1.4 s, which was more than half of a
    zero-call re-run of a finished 1,000-record run (P4). The rarer intervals
    (Newcombe differences, correlations) still come from statsmodels and scipy.
    """
    if n == 0:
        return None, None
    z2 = _Z95 * _Z95
    p = k / n
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = _Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _percentile_ci(values: np.ndarray) -> CI:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return None, None
    lo, hi = np.percentile(finite, [2.5, 97.5])
    return float(lo), float(hi)


def _resampled_rates(g: np.ndarray, n: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Pooled rate sum(g)/sum(n) per bootstrap replicate; NaN where a replicate has no n."""
    num, den = g[idx].sum(axis=1), n[idx].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def cluster_bootstrap(per_item: ItemCounts, seed: int = 0, reps: int = BOOTSTRAP_REPS) -> CI:
    """95% percentile CI of sum(genuine)/sum(n), resampling items with replacement."""
    if not per_item:
        return None, None
    arr = np.asarray(per_item, dtype=np.float64)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(per_item), size=(reps, len(per_item)))
    return _percentile_ci(_resampled_rates(arr[:, 0], arr[:, 1], idx))


def paired_bootstrap_diff(
    a: ItemCounts, b: ItemCounts, seed: int = 0, reps: int = BOOTSTRAP_REPS
) -> CI:
    """CI of rate(a) - rate(b) where a[i] and b[i] are the same item (paired clusters).

    Resampling items jointly keeps the item effect (an easy item is easy under both
    conditions), which is what makes a perturbation delta tighter than two independent
    intervals would suggest.
    """
    if not a or len(a) != len(b):
        return None, None
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    idx = np.random.default_rng(seed).integers(0, len(a), size=(reps, len(a)))
    diff = _resampled_rates(x[:, 0], x[:, 1], idx) - _resampled_rates(y[:, 0], y[:, 1], idx)
    return _percentile_ci(diff)


def independent_bootstrap_diff(
    a: ItemCounts, b: ItemCounts, seed: int = 0, reps: int = BOOTSTRAP_REPS
) -> CI:
    """CI of rate(a) - rate(b) for unrelated item sets, each resampled by item."""
    if not a or not b:
        return None, None
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    rng = np.random.default_rng(seed)
    ia = rng.integers(0, len(a), size=(reps, len(a)))
    ib = rng.integers(0, len(b), size=(reps, len(b)))
    diff = _resampled_rates(x[:, 0], x[:, 1], ia) - _resampled_rates(y[:, 0], y[:, 1], ib)
    return _percentile_ci(diff)


def newcombe_diff(k1: int, n1: int, k2: int, n2: int) -> CI:
    """Newcombe's hybrid-score CI of p1 - p2 for independent proportions (one sample each)."""
    if n1 == 0 or n2 == 0:
        return None, None
    from statsmodels.stats.proportion import confint_proportions_2indep

    lo, hi = confint_proportions_2indep(k1, n1, k2, n2, method="newcomb", compare="diff")
    return float(lo), float(hi)
