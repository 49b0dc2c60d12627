"""GF@k and the per-item spread (analysis.sampling).

Run: ``.venv/bin/python -m pytest tests/analysis/test_sampling.py -q`` (~30 s).
GF@k is checked against brute-force enumeration of every k-subset of every item's
samples; the spread against counts made here from the definitions; the corrected values
against simulated cells whose truth is known.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from userturn.analysis.sampling import (
    SPREAD_EDGES,
    corrected_gf_at_k,
    corrected_spread,
    gf_at_k,
    gf_at_k_items,
    gf_ks,
    item_spread,
    null_spread,
)


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


def _judged(
    rng: np.random.Generator, p: float, items: int, k: int, se: float, sp: float
) -> tuple[list[tuple[int, int]], float]:
    """A cell as a judge of (se, sp) sees it (item probabilities from a Beta with mean
    p), and its true GF@k."""
    probs = np.zeros(items) if p == 0 else rng.beta(p * 4, (1 - p) * 4, items)
    true = rng.binomial(k, probs)
    seen = rng.binomial(true, se) + rng.binomial(k - true, 1 - sp)
    return [(int(s), k) for s in seen], float(np.mean(1 - (1 - probs) ** k))


def test_corrected_gf_at_k_is_gf_at_k_for_a_perfect_judge() -> None:
    rng = np.random.default_rng(3)
    per_item = [(int(rng.integers(0, 5)), 4) for _ in range(30)]
    ones = np.ones(200)
    got = corrected_gf_at_k(per_item, ones, ones, (1.0, 1.0))
    for k, value in gf_at_k(per_item).items():
        assert got[k].value == pytest.approx(value, abs=1e-12)
        assert got[k].null == 0.0


def test_with_no_genuine_turn_the_judged_gf4_sits_at_its_null_floor() -> None:
    """The card's pooled error rates (se 0.756, sp 0.842): with no genuine turn at all,
    judged GF@4 is about 0.50. The null floor says so, and the corrected value's CI
    contains the truth, 0."""
    se, sp = 0.756, 0.842
    rng = np.random.default_rng(0)
    raw, hits = [], 0
    for s in range(150):
        per_item, truth = _judged(rng, 0.0, 50, 4, se, sp)
        got = corrected_gf_at_k(per_item, rng.beta(121.5, 39.5, 400), rng.beta(267.5, 50.5, 400),
                                (se, sp), seed=s)[4]  # fmt: skip
        raw.append(gf_at_k(per_item)[4])
        assert got.null == pytest.approx(1 - sp**4)
        assert got.ci_low is not None and got.ci_high is not None
        hits += int(got.ci_low <= truth <= got.ci_high)
    assert np.mean(raw) == pytest.approx(1 - sp**4, abs=0.02)
    assert 1 - sp**4 == pytest.approx(0.50, abs=0.01)
    assert hits / 150 >= 0.93


@pytest.mark.parametrize("p", [0.02, 0.2, 0.5])
def test_corrected_gf_at_k_covers_the_true_gf(p: float) -> None:
    se, sp = 0.756, 0.842
    rng = np.random.default_rng(int(p * 100))
    hits = 0
    for s in range(120):
        per_item, truth = _judged(rng, p, 50, 4, se, sp)
        got = corrected_gf_at_k(per_item, rng.beta(121.5, 39.5, 400), rng.beta(267.5, 50.5, 400),
                                (se, sp), seed=s)[4]  # fmt: skip
        assert got.ci_low is not None and got.ci_high is not None
        hits += int(got.ci_low - 1e-12 <= truth <= got.ci_high + 1e-12)
    assert hits / 120 >= 0.93


def test_null_spread_is_what_a_judge_reports_when_nothing_is_genuine() -> None:
    never, sometimes, always = null_spread([(0, 4), (0, 4), (0, 1)], 0.9)  # type: ignore[misc]
    assert never == pytest.approx((0.9**4 * 2 + 0.9) / 3)
    assert always == pytest.approx((0.1**4 * 2 + 0.1) / 3)
    assert never + sometimes + always == pytest.approx(1.0)
    assert null_spread([(0, 0)], 0.9) is None


def test_corrected_spread_is_the_spread_for_a_perfect_judge() -> None:
    """With se = sp = 1 the corrected shares are the judged ones, items of unequal n too."""
    rng = np.random.default_rng(3)
    per_item = [(int(rng.integers(0, 5)), 4) for _ in range(30)] + [(1, 3), (0, 2), (2, 2)]
    ones = np.ones(200)
    got = corrected_spread(per_item, ones, ones, (1.0, 1.0))
    want = item_spread(per_item)
    assert got is not None
    assert got.never.value == pytest.approx(want.never, abs=1e-12)
    assert got.sometimes.value == pytest.approx(want.sometimes, abs=1e-12)
    assert got.always.value == pytest.approx(want.always, abs=1e-12)
    assert (got.never.null, got.always.null) == (1.0, 0.0)
    assert corrected_spread([(0, 0)], ones, ones, (1.0, 1.0)) is None


def _judged_spread(
    rng: np.random.Generator, p: float, se: float, sp: float
) -> tuple[list[tuple[int, int]], dict[str, float]]:
    """A cell of 50 items × 4 samples (one in ten items lost one judgment) as a judge of
    (se, sp) sees it, and its true shares: per item with n ok judgments, all n samples
    not genuine with chance (1 - π)^n, all genuine with chance π^n."""
    probs = np.zeros(50) if p == 0 else rng.beta(p * 4, (1 - p) * 4, 50)
    n = 4 - (rng.random(50) < 0.1).astype(int)
    true = rng.binomial(n, probs)
    seen = rng.binomial(true, se) + rng.binomial(n - true, 1 - sp)
    never, always = float(np.mean((1 - probs) ** n)), float(np.mean(probs**n))
    truth = {"never": never, "sometimes": 1 - never - always, "always": always}
    return [(int(a), int(b)) for a, b in zip(seen, n, strict=True)], truth


@pytest.mark.parametrize("p", [0.0, 0.02, 0.2, 0.5])
def test_corrected_spread_recovers_the_true_spread(p: float) -> None:
    """The card's pooled error rates of the audit (se 0.756, sp 0.842). Each corrected
    share's CI covers its truth at the nominal rate; away from 0 and 1 the point
    estimates average to the truth; with no genuine turn at all the judged "never" sits at
    its null floor (about 0.5) and the corrected one near the truth, 1."""
    se, sp = 0.756, 0.842
    rng = np.random.default_rng(int(p * 100))
    sims = 120
    hits = dict.fromkeys(("never", "sometimes", "always"), 0)
    est = {name: [] for name in hits}  # type: dict[str, list[float]]
    truths = {name: [] for name in hits}  # type: dict[str, list[float]]
    raw_never = []
    for s in range(sims):
        per_item, truth = _judged_spread(rng, p, se, sp)
        got = corrected_spread(per_item, rng.beta(121.5, 39.5, 400), rng.beta(267.5, 50.5, 400),
                               (se, sp), seed=s)  # fmt: skip
        assert got is not None
        raw_never.append(item_spread(per_item).never)
        for name in hits:
            m = getattr(got, name)
            assert m.value is not None and m.ci_low <= m.value <= m.ci_high
            hits[name] += int(m.ci_low - 1e-12 <= truth[name] <= m.ci_high + 1e-12)
            est[name].append(m.value)
            truths[name].append(truth[name])
    for name, h in hits.items():
        assert h / sims >= 0.93, (name, h / sims)
    if p >= 0.2:
        for name in ("never", "sometimes"):
            assert np.mean(est[name]) == pytest.approx(np.mean(truths[name]), abs=0.05), name
    if p == 0:
        assert np.mean(raw_never) == pytest.approx(0.5, abs=0.03)  # the null floor, sp^4
        assert np.mean(est["never"]) >= 0.9 and np.mean(est["always"]) <= 0.02
