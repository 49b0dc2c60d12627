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
