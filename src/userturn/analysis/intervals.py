"""Confidence intervals for follow-up rates and their differences.

Why a module of its own: every number userturn prints carries an interval, and the
interval is where a measurement tool is most easily wrong (samples of one context are
correlated; bootstrap intervals collapse at 0% and 100%). Keeping every interval here,
as pure functions over per-item counts, makes them testable by simulation
(``tests/analysis/test_intervals.py``, ``bench/interval_coverage.py``).

The three entry points return ``(interval, method)``:

- :func:`rate_interval` for a cell: Wilson with one sample per context (``wilson``);
  with k > 1 the cluster bootstrap by item, widened to contain Wilson at the effective
  sample size (``cluster-bootstrap+wilson-floor``).
- :func:`paired_diff_interval` for a perturbation delta (same items on both sides):
  Bonett–Price's adjusted interval (``bonett-price``); with k > 1 its generalisation to
  items joined with the paired cluster bootstrap
  (``paired-cluster-bootstrap+bonett-price-floor``).
- :func:`independent_diff_interval` for ``compare`` across unrelated item sets:
  Newcombe's hybrid score interval (``newcombe``); with k > 1 taken at each side's
  effective sample size and joined with the independent cluster bootstrap
  (``independent-cluster-bootstrap+newcombe-floor``).

The effective sample size is n over the design effect 1 + (m - 1)ρ, with ρ the ANOVA
estimate of the intraclass correlation (the worst case ρ = 1 where it cannot be
estimated, as at 0% and 100%), shrunk for the few items it rests on (Korn & Graubard).

A percentile bootstrap alone is degenerate when every item is at 0% (or 100%): every
replicate is 0 and the interval is [0, 0]. The closed-form partner of each bootstrap
never is, so the union never collapses, and away from the boundaries it mostly
corrects the percentile bootstrap's under-coverage with few items.
"""

from __future__ import annotations

import math

import numpy as np

from userturn.stats import Z95
from userturn.stats import wilson as wilson
from userturn.stats import wilson_at as _wilson

BOOTSTRAP_REPS = 2000
CI = tuple[float | None, float | None]
ItemCounts = list[tuple[int, int]]
"""Per item: (genuine, ok judgments)."""
Interval = tuple[CI, str]
"""An interval and the name of the method that made it (``ci_method`` in summary.json)."""

_Z95 = Z95
_CHUNK = 1 << 21
"""Bootstrap indices drawn per block, so a cell of 100k turns needs tens of MB, not GBs."""


def newcombe_diff(k1: int, n1: int, k2: int, n2: int) -> CI:
    """Newcombe's hybrid-score CI of p1 - p2 for independent proportions (one sample each).

    Closed form for the same reason as :func:`wilson`; equal to statsmodels'
    ``confint_proportions_2indep(method="newcomb")`` (tested).
    """
    if n1 == 0 or n2 == 0:
        return None, None
    return _newcombe(k1 / n1, n1, k2 / n2, n2)


def _newcombe(p1: float, n1: float, p2: float, n2: float) -> tuple[float, float]:
    """Square-and-add of the two Wilson intervals (Newcombe 1998, method 10)."""
    l1, u1 = _wilson(p1, n1)
    l2, u2 = _wilson(p2, n2)
    d = p1 - p2
    return d - math.hypot(p1 - l1, u2 - p2), d + math.hypot(u1 - p1, p2 - l2)


# -- effective sample size -------------------------------------------------------------


def _as_array(per_item: ItemCounts) -> np.ndarray:
    """(items, 2) float array of (genuine, n), without items that have no ok judgment."""
    arr = np.asarray(per_item, dtype=np.float64).reshape(-1, 2)
    return arr[arr[:, 1] > 0]


def intraclass_correlation(per_item: ItemCounts) -> float | None:
    """ANOVA estimate of the within-item correlation of σ, clipped to [0, 1].

    The one-way ANOVA estimator for unbalanced binary clusters (Fleiss; Ridout, Demétrio
    & Firth 1999 found it among the most reliable for binary data). None when the data
    cannot say: fewer than two items, no item with two ok samples, or a pooled rate of
    exactly 0 or 1 (no variation at all).
    """
    return _icc(_as_array(per_item))


def _icc(arr: np.ndarray) -> float | None:
    g, n = arr[:, 0], arr[:, 1]
    items, total, genuine = len(n), float(n.sum()), float(g.sum())
    if items < 2 or total <= items or genuine in (0.0, total):
        return None
    p = genuine / total
    msb = float(np.sum((g - n * p) ** 2 / n)) / (items - 1)
    msw = float(np.sum(g - g * g / n)) / (total - items)
    n0 = (total - float(np.sum(n * n)) / total) / (items - 1)
    denom = msb + (n0 - 1) * msw
    return 1.0 if denom <= 0 else min(1.0, max(0.0, (msb - msw) / denom))


def effective_n(per_item: ItemCounts) -> float:
    """Ok judgments divided by the design effect 1 + (m - 1)ρ, with m = Σn²/Σn.

    That design effect is exact for a pooled rate under exchangeable within-item
    correlation ρ with unequal item sizes. Where ρ cannot be estimated (a pooled rate of
    0% or 100% is the case that matters) it is taken as 1, the worst case: each item's
    samples count as one observation, since zero events say nothing about clustering.
    """
    return _n_eff(_as_array(per_item))


def _n_eff(arr: np.ndarray) -> float:
    n = arr[:, 1]
    total = float(n.sum())
    if total == 0:
        return 0.0
    rho = _icc(arr)
    m = float(np.sum(n * n)) / total
    return total / (1 + (m - 1) * (1.0 if rho is None else rho))


def _t975(df: int) -> float:
    """97.5% quantile of Student's t: exact for 1 and 2 df, else the Cornish–Fisher
    expansion (Abramowitz & Stegun 26.7.5; within 0.13% of scipy from 3 df). Written out
    because importing scipy.stats costs more than the whole aggregation of a small run."""
    if df <= 1:
        return math.tan(math.pi * 0.475)
    if df == 2:
        return 0.95 / math.sqrt(2 * 0.975 * 0.025)
    z, v = _Z95, float(df)
    terms = (
        (z**3 + z) / 4,
        (5 * z**5 + 16 * z**3 + 3 * z) / 96,
        (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
        (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160,
    )
    return z + sum(t / v ** (i + 1) for i, t in enumerate(terms))


def _floor_n(arr: np.ndarray) -> float:
    """Effective n shrunk for the few items it is estimated from: n_eff (z / t_{I-1})².

    Korn & Graubard's (1998) degrees-of-freedom adjustment for proportions from clustered
    samples: the design effect is itself estimated from I items, so the interval should
    be as wide as a t with I - 1 df would make it.
    """
    df = max(1, len(arr) - 1)
    return _n_eff(arr) * (_Z95 / _t975(df)) ** 2


def _pooled(arr: np.ndarray) -> float:
    return float(arr[:, 0].sum() / arr[:, 1].sum())


def _single_sample(*sides: np.ndarray) -> bool:
    """True when no item has two ok judgments on any side: nothing is clustered."""
    return all(s.size == 0 or float(s[:, 1].max()) <= 1 for s in sides)


# -- bootstrap -------------------------------------------------------------------------


def _resampled_sums(values: np.ndarray, rng: np.random.Generator, reps: int) -> np.ndarray:
    """(reps, columns) column sums of counts over items resampled with replacement.

    Indices are drawn in blocks of rows, as small integers, and each column is gathered on
    its own as int32: all faster than gathering rows of a float array with int64 indices,
    which matters for cells of tens of thousands of items.
    """
    items = values.shape[0]
    columns = [np.ascontiguousarray(values[:, c], dtype=np.int32) for c in range(values.shape[1])]
    block = max(1, _CHUNK // items)
    index_type = np.uint16 if items <= 1 << 16 else np.int32
    out = []
    for start in range(0, reps, block):
        idx = rng.integers(0, items, size=(min(block, reps - start), items), dtype=index_type)
        out.append(np.column_stack([np.take(c, idx).sum(axis=1, dtype=np.int64) for c in columns]))
    return np.concatenate(out).astype(np.float64)


def _ratio(sums: np.ndarray, col: int = 0) -> np.ndarray:
    """sums[:, col] / sums[:, col + 1]; NaN where a replicate drew no ok judgment."""
    num, den = sums[:, col], sums[:, col + 1]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def _percentile_ci(values: np.ndarray) -> CI:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return None, None
    lo, hi = np.percentile(finite, [2.5, 97.5])
    return float(lo), float(hi)


def _union(boot: CI, floor: tuple[float, float]) -> CI:
    if boot[0] is None or boot[1] is None:
        return floor
    return min(boot[0], floor[0]), max(boot[1], floor[1])


# -- cells -----------------------------------------------------------------------------


def rate_interval(per_item: ItemCounts, seed: int = 0, reps: int = BOOTSTRAP_REPS) -> Interval:
    """95% CI of a cell's pooled rate sum(genuine)/sum(ok), and its method.

    With at most one ok judgment per item the samples are independent and Wilson is
    exact enough. Otherwise samples of one item are correlated: the cluster bootstrap
    (resampling items) carries that, and the union with Wilson at the effective sample
    size keeps the interval honest where the bootstrap is degenerate (all items at 0% or
    100%) or too narrow (few items).
    """
    arr = _as_array(per_item)
    if _single_sample(arr):
        return wilson(int(arr[:, 0].sum()), int(arr[:, 1].sum())), "wilson"
    return _cluster_rate(arr, seed, reps), "cluster-bootstrap+wilson-floor"


def _cluster_rate(arr: np.ndarray, seed: int, reps: int) -> CI:
    if arr.size == 0:
        return None, None
    sums = _resampled_sums(arr, np.random.default_rng(seed), reps)
    return _union(_percentile_ci(_ratio(sums)), _wilson(_pooled(arr), _floor_n(arr)))


def cluster_bootstrap(per_item: ItemCounts, seed: int = 0, reps: int = BOOTSTRAP_REPS) -> CI:
    """The k > 1 branch of :func:`rate_interval` whatever k is (kept for its callers)."""
    return _cluster_rate(_as_array(per_item), seed, reps)


# -- paired differences ----------------------------------------------------------------


def paired_diff_interval(
    a: ItemCounts, b: ItemCounts, seed: int = 0, reps: int = BOOTSTRAP_REPS
) -> Interval:
    """95% CI of rate(a) - rate(b) where a[i] and b[i] are the same item, and its method.

    Pairing keeps the item effect (an easy item is easy under both conditions), which is
    what makes a perturbation delta tighter than two independent intervals. The
    closed-form part is Bonett & Price's (2012) adjusted interval for paired proportions
    (one of those Fagerland, Lydersen & Laake 2014 recommend), generalised to items of
    several samples; unlike a paired bootstrap or Newcombe's paired square-and-add it
    stays open when no item differs between the conditions, including both at 0%.
    """
    x, y = _paired_arrays(a, b)
    if x is None or y is None:
        return (None, None), "bonett-price"
    if _single_sample(x, y):
        return _bonett_price(x, y), "bonett-price"
    return _paired(x, y, seed, reps), "paired-cluster-bootstrap+bonett-price-floor"


def paired_bootstrap_diff(
    a: ItemCounts, b: ItemCounts, seed: int = 0, reps: int = BOOTSTRAP_REPS
) -> CI:
    """The k > 1 branch of :func:`paired_diff_interval` whatever k is (kept for callers)."""
    x, y = _paired_arrays(a, b)
    return (None, None) if x is None or y is None else _paired(x, y, seed, reps)


def _paired_arrays(a: ItemCounts, b: ItemCounts) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Aligned (items, 2) arrays, without items judged on neither side; None if unusable."""
    if not a or len(a) != len(b):
        return None, None
    x = np.asarray(a, dtype=np.float64).reshape(-1, 2)
    y = np.asarray(b, dtype=np.float64).reshape(-1, 2)
    keep = (x[:, 1] > 0) | (y[:, 1] > 0)
    x, y = x[keep], y[keep]
    if x[:, 1].sum() == 0 or y[:, 1].sum() == 0:
        return None, None
    return x, y


def _paired(x: np.ndarray, y: np.ndarray, seed: int, reps: int) -> CI:
    sums = _resampled_sums(np.hstack([x, y]), np.random.default_rng(seed), reps)
    boot = _percentile_ci(_ratio(sums, 0) - _ratio(sums, 2))
    return _union(boot, _bonett_price(x, y, clustered=True))


def _bonett_price(x: np.ndarray, y: np.ndarray, clustered: bool = False) -> tuple[float, float]:
    """Adjusted Wald CI of a paired difference of pooled rates, generalised to items.

    Bonett & Price add one discordant pair each way (n + 2) and take Wald on the adjusted
    difference; with one sample per item this is exactly that. With k > 1 (``clustered``)
    the two pseudo-items weigh one *effective* observation each: their size is the design
    effect of the difference (observed variance over the variance if samples were
    independent), kept between 1 and the mean item size, and the mean item size where
    both sides are at 0% or 100% (the worst case, as for cells). The variance is the
    linearised (cluster-robust) one of a ratio of sums, with the small-sample factor
    I/(I - 1) and a t quantile with I - 1 df.
    """
    size, crit, scale = 1.0, _Z95, 1.0
    if clustered:
        items = len(x)
        size = _pseudo_size(x, y)
        crit, scale = _t975(max(1, items - 1)), items / max(1, items - 1)
    xs = np.vstack([x, [[size, size], [0.0, size]]])
    ys = np.vstack([y, [[0.0, size], [size, size]]])
    ra, rb = _pooled(xs), _pooled(ys)
    resid = _residuals(xs, ra) - _residuals(ys, rb)
    half = crit * math.sqrt(scale * float(np.sum(resid * resid)))
    return max(-1.0, ra - rb - half), min(1.0, ra - rb + half)


def _pseudo_size(x: np.ndarray, y: np.ndarray) -> float:
    """Samples per Bonett–Price pseudo-item: one effective observation of the difference."""
    na, nb = float(x[:, 1].sum()), float(y[:, 1].sum())
    mean_size = max(na / np.count_nonzero(x[:, 1]), nb / np.count_nonzero(y[:, 1]))
    pa, pb = _pooled(x), _pooled(y)
    independent = pa * (1 - pa) / na + pb * (1 - pb) / nb
    if independent == 0:
        return mean_size
    resid = _residuals(x, pa) - _residuals(y, pb)
    return min(mean_size, max(1.0, float(np.sum(resid * resid)) / independent))


def _residuals(arr: np.ndarray, rate: float) -> np.ndarray:
    """Each item's share of the pooled rate's error: its linearisation (influence)."""
    out: np.ndarray = (arr[:, 0] - rate * arr[:, 1]) / arr[:, 1].sum()
    return out


# -- independent differences -----------------------------------------------------------


def independent_diff_interval(
    a: ItemCounts, b: ItemCounts, seed: int = 0, reps: int = BOOTSTRAP_REPS
) -> Interval:
    """95% CI of rate(a) - rate(b) for unrelated item sets (``compare``), and its method.

    Newcombe's hybrid score interval is the established one for independent proportions
    and stays open when both sides are at 0%; with k > 1 it is taken at each side's
    effective sample size and joined with the independent cluster bootstrap, as for cells.
    """
    x, y = _as_array(a), _as_array(b)
    if x.size == 0 or y.size == 0:
        return (None, None), "newcombe"
    if _single_sample(x, y):
        return newcombe_diff(*_counts(x), *_counts(y)), "newcombe"
    return _independent(x, y, seed, reps), "independent-cluster-bootstrap+newcombe-floor"


def independent_bootstrap_diff(
    a: ItemCounts, b: ItemCounts, seed: int = 0, reps: int = BOOTSTRAP_REPS
) -> CI:
    """The k > 1 branch of :func:`independent_diff_interval` whatever k is (kept for callers)."""
    x, y = _as_array(a), _as_array(b)
    return (None, None) if x.size == 0 or y.size == 0 else _independent(x, y, seed, reps)


def _counts(arr: np.ndarray) -> tuple[int, int]:
    return int(arr[:, 0].sum()), int(arr[:, 1].sum())


def _independent(x: np.ndarray, y: np.ndarray, seed: int, reps: int) -> CI:
    rng = np.random.default_rng(seed)
    diff = _ratio(_resampled_sums(x, rng, reps)) - _ratio(_resampled_sums(y, rng, reps))
    floor = _newcombe(_pooled(x), _floor_n(x), _pooled(y), _floor_n(y))
    return _union(_percentile_ci(diff), floor)


def mean_interval(values: list[float], seed: int = 0, reps: int = BOOTSTRAP_REPS) -> CI:
    """95% bootstrap CI (BCa, scipy) of the mean of per-context values, e.g. the likelihood
    probe's margins; contexts are independent, so they are resampled one by one."""
    if len(values) < 2:
        return None, None
    if len(set(values)) == 1:
        return values[0], values[0]  # every context agrees: no sampling spread to show
    from scipy.stats import bootstrap

    res = bootstrap(
        (np.asarray(values, dtype=np.float64),),
        np.mean,
        n_resamples=reps,
        method="BCa",
        random_state=np.random.default_rng(seed),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)
