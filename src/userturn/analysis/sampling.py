"""Sampling-aware measures of a cell: GF@k and the per-item spread.

Why: with k samples per context a pooled rate hides how the genuine follow-ups are
spread. A model that writes a genuine follow-up for every item one time in four and a
model that always does for a quarter of the items and never for the rest have the same
rate, but a user who resamples gets a follow-up from the first. GF@k (the pass@k of
code generation, Chen et al. 2021, applied to σ) and the never/sometimes/always shares
tell those apart.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from userturn.analysis.intervals import ItemCounts

SPREAD_EDGES = tuple(i / 10 for i in range(11))
"""Bins of :attr:`Spread.histogram` over per-item rates: [0, .1), …, [.9, 1.0] (last closed)."""


def gf_ks(max_samples: int) -> list[int]:
    """k = 1, 2, 4, … up to the samples taken."""
    out, k = [], 1
    while k <= max_samples:
        out.append(k)
        k *= 2
    return out


def gf_at_k(per_item: ItemCounts) -> dict[int, float]:
    """GF@k: the chance that at least one of k samples of an item is a genuine follow-up.

    For each k in 1, 2, 4, … up to the most ok judgments any item has, the mean over
    items of the unbiased estimator 1 - C(n - c, k) / C(n, k), where an item has n ok
    judgments of which c genuine. Only items with n ≥ k enter the mean for that k: an
    item whose other samples came back unparseable has no unbiased estimate at that k,
    and padding it with a guess would bias the figure. :func:`gf_at_k_items` gives how
    many items each k used. GF@1 is the mean per-item rate (each item weighs the same),
    which differs from the pooled rate when items have unequal n.
    """
    g, n = _arrays(per_item)
    return {k: float(_gf_per_item(g[n >= k], n[n >= k], k).mean()) for k in _ks(n)}


def gf_at_k_items(per_item: ItemCounts) -> dict[int, int]:
    """Items behind each GF@k (those with at least k ok judgments), same keys as gf_at_k."""
    _, n = _arrays(per_item)
    return {k: int(np.count_nonzero(n >= k)) for k in _ks(n)}


def _arrays(per_item: ItemCounts) -> tuple[np.ndarray, np.ndarray]:
    arr = np.asarray(per_item, dtype=np.int64).reshape(-1, 2)
    if arr.size and (np.any(arr < 0) or np.any(arr[:, 0] > arr[:, 1])):
        raise ValueError("per-item counts must satisfy 0 <= genuine <= n")
    return arr[:, 0], arr[:, 1]


def _ks(n: np.ndarray) -> list[int]:
    return gf_ks(int(n.max())) if n.size else []


def _gf_per_item(c: np.ndarray, n: np.ndarray, k: int) -> np.ndarray:
    """1 - C(n - c, k) / C(n, k) per item (n ≥ k), as a product of k ratios ≤ 1.

    C(n - c, k) / C(n, k) = Π_{i<k} (n - c - i) / (n - i): no factorials, so no overflow
    for large n, and the factor that reaches n - c - i = 0 makes it exactly 0 when fewer
    than k samples are not genuine.
    """
    i = np.arange(k)
    terms = np.clip((n[:, None] - c[:, None] - i) / (n[:, None] - i), 0.0, 1.0)
    out: np.ndarray = 1.0 - terms.prod(axis=1)
    return out


@dataclass(frozen=True)
class Spread:
    """How genuine follow-ups are spread over a cell's items (items with ≥ 1 ok judgment).

    ``never``, ``sometimes`` and ``always`` are shares of items whose ok judgments were
    all not genuine, mixed, and all genuine (None when no item has an ok judgment). An
    item with one ok judgment is never or always. ``histogram`` counts items per bin of
    per-item rate, bins :data:`SPREAD_EDGES`.
    """

    never: float | None
    sometimes: float | None
    always: float | None
    n_items: int
    histogram: tuple[int, ...]


def item_spread(per_item: ItemCounts) -> Spread:
    """The never/sometimes/always shares and the histogram of per-item rates."""
    g, n = _arrays(per_item)
    g, n = g[n > 0], n[n > 0]
    hist = tuple(int(x) for x in np.histogram(g / np.maximum(n, 1), bins=SPREAD_EDGES)[0])
    if n.size == 0:
        return Spread(None, None, None, 0, hist)
    mixed = float(np.mean((g > 0) & (g < n)))
    return Spread(float(np.mean(g == 0)), mixed, float(np.mean(g == n)), int(n.size), hist)


@dataclass(frozen=True)
class KMeasure:
    """A k-measure corrected through the judge's error model, with its 95% CI, beside
    its null floor: what a judge with these error rates reports when no turn is
    genuine. A judged value near its floor is no evidence of genuine follow-ups."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    null: float
    null_ci_low: float
    null_ci_high: float


def _moments(c: np.ndarray, n: np.ndarray, k: int) -> np.ndarray:
    """m[i, j] = C(c_i, j) / C(n_i, j) for j = 0..k: unbiased for r_i^j, the j-th power
    of item i's judged-genuine probability (items with n_i ≥ k)."""
    out = np.ones((c.size, k + 1))
    for step in range(1, k + 1):
        ratio = np.clip((c - step + 1) / np.maximum(n - step + 1, 1), 0.0, 1.0)
        out[:, step] = out[:, step - 1] * ratio
    return out


def _gf_corrected(mean_m: np.ndarray, k: int, sens: np.ndarray, spec: np.ndarray) -> np.ndarray:
    """1 - mean_i E[(1 - π_i)^k] per draw of (se, sp); ``mean_m``: the item means of
    the moments (k + 1 of them, or one row of them per draw).

    An item's judged probability is r = (1 - sp) + (se + sp - 1)π, so
    1 - π = (se - r) / (se + sp - 1) and E[(1 - π)^k] expands in the moments of r, each
    estimated without bias from the item's n samples (``_moments``). With a perfect
    judge this is the GF@k estimator of :func:`gf_at_k`.
    """
    from scipy.special import comb

    youden = sens + spec - 1
    j = np.arange(k + 1)
    coef = comb(k, j) * (-1.0) ** j  # (k choose j)(-1)^j
    powers = sens[:, None] ** (k - j)[None, :] * coef[None, :]  # draws × (k + 1)
    expect = (powers * mean_m).sum(axis=-1) / np.where(youden > 0, youden, np.nan) ** k
    out: np.ndarray = 1.0 - expect
    return out


def corrected_gf_at_k(
    per_item: ItemCounts,
    sens: np.ndarray,
    spec: np.ndarray,
    point: tuple[float, float],
    seed: int = 0,
) -> dict[int, KMeasure]:
    """GF@k corrected for the judge's errors, per k of :func:`gf_at_k`.

    ``sens``, ``spec``: joint draws of the judge's error rates (``analysis.strata``);
    ``point``: the rates of the point estimate. The CI is the percentile interval over
    replicates that resample items with replacement and take one error-rate draw each,
    clipped to [0, 1]; a draw with se + sp ≤ 1 counts as 0 for the lower bound and 1
    for the upper. The null floor is 1 - sp^k, with the interval of the sp draws.
    """
    g, n = _arrays(per_item)
    rng = np.random.default_rng(seed)
    out = {}
    for k in _ks(n):
        c, nk = g[n >= k], n[n >= k]
        m = _moments(c, nk, k)
        one = _gf_corrected(m.mean(axis=0), k, np.array([point[0]]), np.array([point[1]]))
        value = float(np.clip(one[0], 0.0, 1.0))
        idx = rng.integers(0, c.size, size=(sens.size, c.size))
        boot = m[idx].mean(axis=1)  # draws × (k + 1)
        draws = _gf_corrected(boot, k, sens, spec)
        ok = np.isfinite(draws)
        lo = float(np.percentile(np.where(ok, np.clip(draws, 0, 1), 0.0), 2.5))
        hi = float(np.percentile(np.where(ok, np.clip(draws, 0, 1), 1.0), 97.5))
        null = 1 - spec**k
        out[k] = KMeasure(
            value if np.isfinite(value) else None,
            min(lo, value),
            max(hi, value),
            float(1 - point[1] ** k),
            float(np.percentile(null, 2.5)),
            float(np.percentile(null, 97.5)),
        )
    return out


def null_spread(per_item: ItemCounts, spec: float) -> tuple[float, float, float] | None:
    """(never, sometimes, always) shares a judge of specificity ``spec`` reports when no
    turn is genuine: an item with n ok judgments is "always" with chance (1 - sp)^n and
    "never" with chance sp^n."""
    _, n = _arrays(per_item)
    n = n[n > 0]
    if n.size == 0:
        return None
    never, always = float(np.mean(spec**n)), float(np.mean((1 - spec) ** n))
    return never, 1 - never - always, always


@dataclass(frozen=True)
class SpreadMeasures:
    """The item spread corrected through the judge's error model (``corrected_spread``),
    each share with its CI and null floor."""

    never: KMeasure
    sometimes: KMeasure
    always: KMeasure


def _spread_terms(m: int, sens: np.ndarray, spec: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For an item with m ok judgments of which c = 0..m judged genuine, per draw of
    (se, sp): unbiased estimates of (1 - π)^m and π^m, the chances that all m samples
    are truly not genuine and truly genuine (draws × (m + 1); NaN where se + sp ≤ 1).

    With r = (1 - sp) + Yπ and Y = se + sp - 1: (1 - π)^m = (se - r)^m / Y^m and
    π^m = (r - (1 - sp))^m / Y^m; each expands in r^j, estimated by C(c, j) / C(m, j).
    """
    from scipy.special import comb

    moments = _moments(np.arange(m + 1), np.full(m + 1, m), m)  # c × j
    j = np.arange(m + 1)
    youden = sens + spec - 1
    scale = np.where(youden > 0, youden, np.nan)[:, None] ** m
    none = comb(m, j) * (-1.0) ** j * sens[:, None] ** (m - j)
    every = comb(m, j) * (-(1 - spec))[:, None] ** (m - j)
    return none @ moments.T / scale, every @ moments.T / scale


def _spread_means(
    groups: list[tuple[int, float]], weights: list[np.ndarray], sens: np.ndarray,
    spec: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The corrected never and always shares per draw: for each group of items with m
    ok judgments (``groups``: m and the group's share of items), the draw's shares of
    the counts c = 0..m (``weights``, draws × (m + 1)) times ``_spread_terms``."""
    never = np.zeros(sens.size)
    always = np.zeros(sens.size)
    for (m, share), w in zip(groups, weights, strict=True):
        none, every = _spread_terms(m, sens, spec)
        never += share * (w * none).sum(axis=1)
        always += share * (w * every).sum(axis=1)
    return never, always


def _measure(point: float, draws: np.ndarray, null: float, nulls: np.ndarray) -> KMeasure:
    """A share clipped to [0, 1] with its percentile CI (a draw with se + sp ≤ 1 counts
    as 0 for the lower bound and 1 for the upper), beside its null floor."""
    ok = np.isfinite(draws)
    lo = float(np.percentile(np.where(ok, np.clip(draws, 0, 1), 0.0), 2.5))
    hi = float(np.percentile(np.where(ok, np.clip(draws, 0, 1), 1.0), 97.5))
    floor = (null, float(np.percentile(nulls, 2.5)), float(np.percentile(nulls, 97.5)))
    if not np.isfinite(point):
        return KMeasure(None, lo, hi, *floor)
    value = float(np.clip(point, 0.0, 1.0))
    return KMeasure(value, min(lo, value), max(hi, value), *floor)


def corrected_spread(
    per_item: ItemCounts,
    sens: np.ndarray,
    spec: np.ndarray,
    point: tuple[float, float],
    seed: int = 0,
) -> SpreadMeasures | None:
    """The never/sometimes/always shares corrected for the judge's errors: what a judge
    that never errs would report on the same items with the same number of samples.

    Why: a judge of specificity sp calls an item with no genuine sample "always" with
    chance (1 - sp)^n, and one whose samples are all genuine "never" with chance
    (1 - se)^n, so the judged shares drift towards their null floors (``null_spread``).
    Per item with n ok judgments the true shares are (1 - π)^n and π^n, estimated without
    bias from its judged count through the card's error rates (``_spread_terms``); with
    a perfect judge this is :func:`item_spread`.

    ``sens``, ``spec``: joint draws of the error rates; ``point``: the rates of the point
    estimate. Each replicate takes one error-rate draw and redraws the items' shares of
    judged counts from a Dirichlet over the counts seen plus one prior item spread evenly
    over the n + 1 possible counts. Resampling the items themselves would never draw a
    count the cell lacks, and the rare all-genuine count carries most of the always
    share's weight (at se 0.756, sp 0.842 and n = 4 it counts 3.9, an item with none
    0.003), so that interval covered only 0.76-0.88 of true values in simulation; with
    the prior item it is nominal (``tests/analysis/test_sampling.py``). The floors' CIs
    are over the sp draws. None when no item has an ok judgment.
    """
    g, n = _arrays(per_item)
    g, n = g[n > 0], n[n > 0]
    if n.size == 0:
        return None
    rng = np.random.default_rng(seed)
    sizes = [int(m) for m in np.unique(n)]
    groups = [(m, float(np.mean(n == m))) for m in sizes]
    hists = [np.bincount(g[n == m], minlength=m + 1).astype(float) for m in sizes]
    seen = [(h / h.sum())[None, :] for h in hists]
    one = _spread_means(groups, seen, np.array([point[0]]), np.array([point[1]]))
    drawn = [rng.dirichlet(h + 1 / h.size, size=sens.size) for h in hists]
    never, always = _spread_means(groups, drawn, sens, spec)
    null = null_spread(per_item, point[1])
    assert null is not None
    null_never = (spec[:, None] ** n[None, :]).mean(axis=1)
    null_always = ((1 - spec)[:, None] ** n[None, :]).mean(axis=1)
    null_sometimes = 1 - null_never - null_always
    return SpreadMeasures(
        _measure(float(one[0][0]), never, null[0], null_never),
        _measure(float(1 - one[0][0] - one[1][0]), 1 - never - always, null[1], null_sometimes),
        _measure(float(one[1][0]), always, null[2], null_always),
    )
