"""Intervals on the paper's claims (analysis.claims, analysis.views).

Run: ``.venv/bin/python -m pytest tests/analysis/test_claims.py -q`` (~20 s). The
equivalence statement and the corrected paired deltas are checked on simulated models
and items with a known truth; the views on a synthetic run with a shipped judge card.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from synthetic_runs import Spec, build_run
from userturn.analysis import views as V
from userturn.analysis.claims import (
    NOT_SHOWN,
    SHOWN,
    ModelItems,
    corrected_paired_delta,
    rho_interval,
)
from userturn.analysis.intervals import paired_diff_interval
from userturn.rundir.store import Store


def _models(
    rng: np.random.Generator, accs: list[float], rates: list[float], items: int, k: int
) -> list[ModelItems]:
    out = []
    for acc, rate in zip(accs, rates, strict=True):
        correct = rng.binomial(1, acc, items).astype(np.float64)
        out.append(
            ModelItems(correct, rng.binomial(k, rate, items).astype(float), np.full(items, k))
        )
    return out


def test_no_relation_across_many_models_is_shown_equivalent() -> None:
    """150 models whose rates do not depend on accuracy: |ρ| < 0.3 is shown (it takes
    that many: with 40, a sample ρ has a standard deviation near 0.16)."""
    rng = np.random.default_rng(0)
    accs = list(rng.uniform(0.2, 0.9, 150))
    got = rho_interval(_models(rng, accs, list(rng.uniform(0.1, 0.5, 150)), 100, 4))
    assert got.equivalence == SHOWN
    assert got.ci_low is not None and got.ci_high is not None
    assert -0.3 < got.ci_low < 0 < got.ci_high < 0.3


def test_four_models_cannot_show_equivalence() -> None:
    """The paper's grid size: four models leave ρ anywhere, so "decoupled" is not shown."""
    rng = np.random.default_rng(1)
    got = rho_interval(_models(rng, [0.3, 0.5, 0.7, 0.9], [0.3, 0.2, 0.4, 0.25], 100, 4))
    assert got.equivalence == NOT_SHOWN
    assert got.ci_low is not None and got.ci_high is not None and got.ci_high - got.ci_low > 1
    assert rho_interval(_models(rng, [0.3, 0.5], [0.3, 0.2], 10, 1)).rho is None


def test_a_strong_relation_is_not_called_equivalent() -> None:
    rng = np.random.default_rng(2)
    accs = list(np.linspace(0.1, 0.9, 30))
    got = rho_interval(_models(rng, accs, [0.05 + 0.5 * a for a in accs], 200, 4))
    assert got.equivalence == NOT_SHOWN and got.ci_low is not None and got.ci_low > 0.5


@pytest.mark.parametrize("effect", [0.0, 0.2])
def test_the_corrected_paired_delta_undoes_the_judges_shrinkage(effect: float) -> None:
    """Raw deltas shrink a true effect by J = se + sp - 1 (0.60 for the offline card);
    the corrected delta's CI covers the true effect, the raw one's mostly does not."""
    se, sp = 0.756, 0.842
    rng = np.random.default_rng(int(effect * 10))
    raw_hits = hits = 0
    sims = 120
    for s in range(sims):
        probs = rng.beta(1, 3, 100)
        pa = np.clip(probs + effect, 0, 1)
        seen = []
        for p in (pa, probs):
            true = rng.binomial(1, p)
            seen.append(
                [(int(x), 1) for x in rng.binomial(true, se) + rng.binomial(1 - true, 1 - sp)]
            )
        truth = float(np.mean(pa - probs))
        ci, _ = paired_diff_interval(seen[0], seen[1])
        youden = rng.beta(121.5, 39.5, 1000) + rng.beta(267.5, 50.5, 1000) - 1
        got = corrected_paired_delta(seen[0], seen[1], ci, youden, seed=s)
        assert got.ci_low is not None and got.ci_high is not None
        hits += int(got.ci_low <= truth <= got.ci_high)
        assert ci[0] is not None and ci[1] is not None
        raw_hits += int(ci[0] <= truth <= ci[1])
    assert hits / sims >= 0.93
    if effect:
        assert raw_hits / sims < 0.8


def test_views_carry_paired_temperature_and_corrected_perturbation_deltas(
    tmp_path: Path,
) -> None:
    build_run(tmp_path, Spec(judges=("rules",)), write=False)
    with Store(tmp_path / "store.sqlite") as store:
        a = V.analyze(store)
    temps = a.temperature_deltas
    assert temps and {t.temperature for t in temps} == {0.7, 1.0}
    for t in temps:
        assert t.delta is not None and t.ci_low is not None and t.ci_high is not None
        assert t.ci_low <= t.delta <= t.ci_high
        assert t.ci_method.startswith(("bonett-price", "paired-cluster"))
    has_card = [d for d in a.deltas if d.delta_corrected is not None]
    for d in has_card:
        assert d.ci_corrected_low is not None and d.ci_corrected_high is not None
        assert d.ci_corrected_low <= d.delta_corrected <= d.ci_corrected_high
    data = a.to_json()
    assert data.get("temperature_deltas")
