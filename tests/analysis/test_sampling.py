"""GF@k and the per-item spread (analysis.sampling).

Run: ``.venv/bin/python -m pytest tests/analysis/test_sampling.py -q`` (~1 s).
GF@k is checked against brute-force enumeration of every k-subset of every item's
samples; the spread against counts made here from the definitions.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from userturn.analysis.sampling import SPREAD_EDGES, gf_at_k, gf_at_k_items, gf_ks, item_spread


def _brute_gf(per_item: list[tuple[int, int]], k: int) -> float:
    """Mean over items with n ≥ k of the share of k-subsets holding a genuine sample."""
    shares = []
    for c, n in per_item:
        if n < k:
            continue
        samples = [1] * c + [0] * (n - c)
        subsets = list(itertools.combinations(samples, k))
        shares.append(sum(1 for s in subsets if any(s)) / len(subsets))
    return sum(shares) / len(shares)


@pytest.mark.parametrize("seed", range(6))
def test_gf_at_k_equals_brute_force_enumeration(seed: int) -> None:
    rng = np.random.default_rng(seed)
    per_item = []
    for _ in range(int(rng.integers(1, 8))):
        n = int(rng.integers(0, 9))
        per_item.append((int(rng.integers(0, n + 1)), n))
    got = gf_at_k(per_item)
    max_n = max(n for _, n in per_item)
    assert list(got) == [k for k in (1, 2, 4, 8) if k <= max_n]
    for k, value in got.items():
        assert value == pytest.approx(_brute_gf(per_item, k), abs=1e-12), (k, per_item)


def test_items_with_fewer_samples_than_k_are_left_out_and_counted() -> None:
    per_item = [(1, 4), (0, 4), (4, 4), (2, 3), (0, 1), (0, 0)]
    assert gf_at_k_items(per_item) == {1: 5, 2: 4, 4: 3}
    assert gf_at_k(per_item)[4] == pytest.approx((1 + 0 + 1) / 3)


def test_gf_at_1_is_the_mean_item_rate() -> None:
    per_item = [(1, 4), (0, 2), (3, 3), (2, 5)]
    assert gf_at_k(per_item)[1] == pytest.approx(np.mean([1 / 4, 0, 1, 2 / 5]))


def test_gf_is_exact_for_large_n() -> None:
    n, c, k = 2000, 3, 1024
    exact = 1 - math.comb(n - c, k) / math.comb(n, k)
    assert gf_at_k([(c, n)])[k] == pytest.approx(exact, rel=1e-9)
    assert gf_at_k([(1000, n)])[k] == 1.0


def test_gf_ks_and_empty_cells() -> None:
    assert gf_ks(0) == [] and gf_ks(1) == [1] and gf_ks(7) == [1, 2, 4] and gf_ks(8)[-1] == 8
    assert gf_at_k([]) == {} and gf_at_k([(0, 0)]) == {}


def test_bad_counts_are_refused() -> None:
    with pytest.raises(ValueError):
        gf_at_k([(3, 2)])
    with pytest.raises(ValueError):
        item_spread([(-1, 2)])


def test_item_spread_shares_and_histogram() -> None:
    per_item = [(0, 4), (0, 1), (4, 4), (1, 1), (2, 4), (1, 3), (0, 0), (3, 4)]
    judged = [(c, n) for c, n in per_item if n > 0]
    got = item_spread(per_item)
    assert got.n_items == len(judged)
    assert got.never == pytest.approx(sum(1 for c, _ in judged if c == 0) / len(judged))
    assert got.always == pytest.approx(sum(1 for c, n in judged if c == n) / len(judged))
    assert got.sometimes == pytest.approx(sum(1 for c, n in judged if 0 < c < n) / len(judged))
    assert got.never + got.sometimes + got.always == pytest.approx(1.0)  # type: ignore[operator]
    expected = [0] * (len(SPREAD_EDGES) - 1)
    for c, n in judged:
        expected[min(int(c / n * 10), 9)] += 1
    assert list(got.histogram) == expected


def test_item_spread_of_an_unjudged_cell() -> None:
    got = item_spread([(0, 0)])
    assert (got.never, got.sometimes, got.always, got.n_items) == (None, None, None, 0)
    assert sum(got.histogram) == 0
