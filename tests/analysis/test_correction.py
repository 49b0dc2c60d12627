"""Judge-corrected rates (analysis.correction): Rogan–Gladen with a CI over items and card.

Run: ``.venv/bin/python -m pytest tests/analysis/test_correction.py -q`` (~10 s).
The coverage tests simulate judges with known sensitivity and specificity, cards from
reference sets of realistic size, and clustered items (``coverage_sim``);
``bench/interval_coverage.py`` runs them at full size.
"""

from __future__ import annotations

import numpy as np
import pytest
from coverage_sim import Design, Judge, coverage, judged_cell

from userturn.analysis.correction import Corrected, corrected_rate, rogan_gladen

SIMS = 150
REPS = 500
CARD = {"tp": 81, "fn": 9, "fp": 10, "tn": 200}


def test_rogan_gladen_inverts_a_known_judge() -> None:
    for p in [0.0, 0.1, 0.5, 0.93]:
        for sens, spec in [(0.9, 0.95), (0.7, 0.99), (0.99, 0.6)]:
            observed = sens * p + (1 - spec) * (1 - p)
            assert rogan_gladen(observed, sens, spec) == pytest.approx(p)
    assert rogan_gladen(0.3, 0.5, 0.5) is None
    assert rogan_gladen(0.3, 0.4, 0.5) is None


def test_perfect_card_keeps_the_observed_rate() -> None:
    per_item = [(1, 4), (0, 4), (3, 4), (2, 4)] * 5
    got = corrected_rate(per_item, {"tp": 120, "fn": 0, "fp": 0, "tn": 180})
    assert got.defined and got.note == ""
    assert got.rate == pytest.approx(30 / 80)
    assert got.ci_low is not None and got.ci_high is not None
    assert got.ci_low < 30 / 80 < got.ci_high


def test_point_estimate_and_interval_follow_the_card() -> None:
    per_item = [(1, 4), (0, 4), (3, 4), (2, 4)] * 5
    got = corrected_rate(per_item, CARD)
    sens, spec = 81 / 90, 200 / 210
    assert got.rate == pytest.approx((30 / 80 + spec - 1) / (sens + spec - 1))
    assert got.ci_low is not None and got.ci_high is not None and got.rate is not None
    assert 0 <= got.ci_low < got.rate < got.ci_high <= 1


def test_undefined_when_the_card_carries_no_information() -> None:
    per_item = [(1, 2), (0, 2)]
    got = corrected_rate(per_item, {"tp": 5, "fn": 5, "fp": 6, "tn": 4})
    assert got == Corrected(None, None, None, False, got.note)
    assert "≤ 1" in got.note
    assert not corrected_rate(per_item, {"tp": 0, "fn": 0, "fp": 1, "tn": 9}).defined
    assert not corrected_rate(per_item, {"tp": 3, "fn": 1, "fp": 0, "tn": 0}).defined
    empty = corrected_rate([(0, 0)], CARD)
    assert not empty.defined and "no ok judgments" in empty.note


def test_card_validation() -> None:
    with pytest.raises(ValueError, match="tn"):
        corrected_rate([(1, 2)], {"tp": 1, "fn": 1, "fp": 1})
    with pytest.raises(ValueError, match="negative"):
        corrected_rate([(1, 2)], {"tp": 1, "fn": -1, "fp": 1, "tn": 3})


def test_rate_below_the_false_positive_rate_is_clipped_with_a_note() -> None:
    got = corrected_rate([(0, 4)] * 30, CARD)
    assert got.defined and got.rate == 0.0
    assert "clipped to 0" in got.note
    assert got.ci_low == 0.0 and got.ci_high is not None and got.ci_high > 0


def test_never_collapses_when_items_and_card_are_at_the_boundary() -> None:
    got = corrected_rate([(0, 4)] * 30, {"tp": 90, "fn": 0, "fp": 0, "tn": 210})
    assert got.rate == 0.0 and got.ci_high is not None and got.ci_high > 0.02


def test_uncertain_card_widens_the_interval_and_says_so() -> None:
    per_item = [(2, 4), (1, 4), (3, 4), (2, 4)] * 10
    weak = corrected_rate(per_item, {"tp": 7, "fn": 3, "fp": 3, "tn": 7})
    strong = corrected_rate(per_item, {"tp": 70, "fn": 30, "fp": 30, "tn": 70})
    assert weak.ci_low is not None and weak.ci_high is not None
    assert strong.ci_low is not None and strong.ci_high is not None
    assert weak.ci_high - weak.ci_low > strong.ci_high - strong.ci_low
    assert "of draws" in weak.note and weak.ci_low == 0.0 and weak.ci_high == 1.0


def test_deterministic_for_a_seed() -> None:
    per_item = [(1, 4), (0, 4), (3, 4), (2, 4)] * 5
    assert corrected_rate(per_item, CARD) == corrected_rate(per_item, CARD)


@pytest.mark.parametrize(
    ("design", "judge"),
    [
        (Design(items=50, k=4), Judge(0.9, 0.95)),
        (Design(items=50, k=4), Judge(0.95, 0.99)),
        (Design(items=100, k=1), Judge(0.9, 0.95)),
    ],
    ids=["k4-j90-95", "k4-j95-99", "k1-j90-95"],
)
@pytest.mark.parametrize("p", [0.0, 0.02, 0.5])
def test_corrected_interval_covers_the_true_rate(design: Design, judge: Judge, p: float) -> None:
    def draw(r: np.random.Generator) -> tuple[float | None, float | None]:
        per_item, card = judged_cell(r, p, design, judge)
        got = corrected_rate(per_item, card, reps=REPS)
        return got.ci_low, got.ci_high

    got = coverage(draw, p, SIMS, seed=21)
    assert got.degenerate == 0
    assert got.coverage >= 0.9, got
    if p == 0.5:
        assert got.coverage <= 0.99, got
