"""Stratum-aware correction (analysis.strata, correction.stratified_rate).

Run: ``.venv/bin/python -m pytest tests/analysis/test_strata.py -q`` (about a minute: the
coverage tests simulate 120 cells per true rate). The shipped offline card's strata set
how far apart the simulated strata are (``coverage_sim.shipped_strata_judge``);
``bench/interval_coverage.py`` runs the same simulation at full size.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import numpy as np
import pytest
from coverage_sim import Design, coverage, shipped_strata_judge, strata_judged_cell

from userturn.analysis.correction import corrected_rate, stratified_rate
from userturn.analysis.strata import error_draws

SIMS = 120
REPS = 400


def _card() -> dict[str, Any]:
    text = resources.files("userturn.judges").joinpath("cards", "offline.json").read_text()
    card: dict[str, Any] = json.loads(text)
    return card


def _s(tp: int, fn: int, fp: int, tn: int) -> dict[str, Any]:
    return {"sigma": {"tp": tp, "fn": fn, "fp": fp, "tn": tn}}


AUDIT_CARD: dict[str, Any] = {
    "sigma": {"tp": 121, "fn": 39, "fp": 50, "tn": 267},
    "strata": {
        "dataset": {
            "gsm8k": _s(6, 7, 5, 56),
            "healthbench": _s(26, 9, 6, 43),
            "healthbench-prompts": _s(37, 7, 4, 42),
            "ifbench": _s(6, 3, 1, 9),
            "ifeval": _s(8, 3, 13, 50),
            "mtbench": _s(8, 2, 6, 37),
            "sharegpt": _s(30, 8, 15, 30),
        },
        "model": {
            "gemma3-270m-base": _s(0, 0, 0, 15),
            "human": _s(10, 4, 0, 1),
            "qwen2.5-coder-0.5b": _s(46, 12, 12, 103),
            "smollm2-135m": _s(65, 23, 38, 148),
        },
    },
}
"""The offline card the audit measured (offline-1+807d7127): pooled se 0.756 and sp
0.842, GSM8K stratum 0.462 and 0.918. Kept here so the audit's finding stays a test
when the shipped card is refit."""


def _cell(genuine: int, n: int) -> list[tuple[int, int]]:
    return [(1, 1)] * genuine + [(0, 1)] * (n - genuine)


def test_a_gsm8k_run_is_corrected_with_its_strata_and_names_them() -> None:
    """make run's counts (13/50 at T=0) on the audited card: the pooled 0.756
    sensitivity is not the GSM8K stratum's 0.46, so the stratified correction names its
    strata, moves the sensitivity toward GSM8K's, and carries the spread between strata
    in a wider CI."""
    card = AUDIT_CARD
    got = stratified_rate(_cell(13, 50), card, "gsm8k", "smollm2-135m", "smollm")
    pooled = corrected_rate(_cell(13, 50), card["sigma"])
    assert got.strata == {"dataset": "gsm8k", "model": "smollm2-135m"}
    assert got.sens is not None and got.spec is not None
    assert 6 / 13 < got.sens < 121 / 160  # partially pooled
    assert got.rate is not None and pooled.rate is not None and got.rate > pooled.rate
    assert got.ci_high is not None and pooled.ci_high is not None
    assert got.ci_high > pooled.ci_high  # the between-stratum variance is in the CI
    assert got.note == ""
    shipped = stratified_rate(_cell(13, 50), _card(), "gsm8k", "smollm2-135m", "smollm")
    assert shipped.strata == {"dataset": "gsm8k", "model": "smollm2-135m"}


def test_a_true_rate_the_pooled_card_maps_to_zero_is_covered() -> None:
    """If the audited card's GSM8K stratum is the truth, a true 20% is seen as 15.8% and
    the pooled correction reads 0%; the stratified CI still contains 20%."""
    card = AUDIT_CARD
    g = card["strata"]["dataset"]["gsm8k"]["sigma"]
    se, sp = g["tp"] / (g["tp"] + g["fn"]), g["tn"] / (g["tn"] + g["fp"])
    seen = se * 0.2 + (1 - sp) * 0.8
    assert seen == pytest.approx(0.158, abs=0.001)
    per_item = _cell(round(seen * 500), 500)
    pooled = corrected_rate(per_item, card["sigma"]).rate
    assert pooled is not None and pooled < 0.005
    got = stratified_rate(per_item, card, "gsm8k", "smollm2-135m")
    assert got.ci_low is not None and got.ci_high is not None
    assert got.ci_low <= 0.2 <= got.ci_high


@pytest.mark.parametrize("card", [AUDIT_CARD, None], ids=["audited", "shipped"])
def test_a_run_the_card_does_not_cover_says_so_and_widens(card: dict[str, Any] | None) -> None:
    """An uncovered dataset or model draws its error rates from the spread across the
    card's strata: the note says so, and the draws are wider than a covered stratum's."""
    card = card or _card()
    rng = np.random.default_rng(0)
    covered = error_draws(card, "gsm8k", "smollm2-135m", "smollm", rng, 4000)
    assert covered is not None
    for dataset, model in [("gsm8k", "llama-3-8b"), ("mmlu", "smollm2-135m")]:
        got = stratified_rate(_cell(13, 50), card, dataset, model, "llama")
        missing = f"model {model!r}" if dataset == "gsm8k" else f"dataset {dataset!r}"
        assert missing in got.note and "extrapolated" in got.note
        assert None in got.strata.values()
        draws = error_draws(card, dataset, model, "llama", rng, 4000)
        assert draws is not None
        assert draws.spec.std() > covered.spec.std() or draws.sens.std() > covered.sens.std()


def test_a_big_stratum_keeps_its_own_rates_and_a_small_one_is_shrunk() -> None:
    def block(x: int, n: int) -> dict[str, Any]:
        return {"sigma": {"tp": x, "fn": n - x, "tn": x, "fp": n - x}}

    card = {
        "sigma": {"tp": 1, "fn": 1, "fp": 1, "tn": 1},
        "strata": {
            "dataset": {
                "big": block(600, 1000),
                "tiny": block(1, 2),
                **{f"d{i}": block(80 + 2 * i, 100) for i in range(5)},
            }
        },
    }
    rng = np.random.default_rng(0)
    big = error_draws(card, "big", "m", "", rng, 4000)
    tiny = error_draws(card, "tiny", "m", "", rng, 4000)
    assert big is not None and tiny is not None
    assert big.point[0] == pytest.approx(0.6, abs=0.01)
    assert 0.6 < tiny.point[0] < 0.9  # pulled from 0.5 toward the other strata (~0.84)


def test_a_card_without_strata_uses_its_pooled_counts_and_says_so() -> None:
    card = {"sigma": {"tp": 81, "fn": 9, "fp": 10, "tn": 200}}
    got = stratified_rate(_cell(20, 100), card, "gsm8k", "m")
    want = corrected_rate(_cell(20, 100), card["sigma"])
    assert got.rate == want.rate and got.strata == {}
    assert "no strata" in got.note


@pytest.mark.parametrize(
    ("p", "target"),
    [(0.0, 0), (0.02, 0), (0.2, 0), (0.5, 0), (0.0, None), (0.2, None)],
    ids=["p0", "p002", "p02", "p05", "p0-unseen", "p02-unseen"],
)
def test_coverage_when_strata_differ_as_much_as_the_shipped_card(
    p: float, target: int | None
) -> None:
    """Strata drawn from the hierarchy fit to the shipped card's datasets; the run is the
    card's smallest stratum (9 genuine, 10 not), or a stratum the card never saw.
    The pooled correction covers 0.925-0.970 in the same simulation on the shipped card,
    0.875-0.922 on the audited one (bench, 400 cells per rate)."""
    judge = shipped_strata_judge(_card(), target)
    design = Design(items=50, k=1)

    def draw(r: np.random.Generator) -> tuple[float | None, float | None]:
        per_item, card, dataset = strata_judged_cell(r, p, design, judge)
        got = stratified_rate(per_item, card, dataset, "m", reps=REPS)
        if not got.defined:  # says the judge carries no information there: any rate
            return 0.0, 1.0
        return got.ci_low, got.ci_high

    got = coverage(draw, p, SIMS, seed=7)
    assert got.coverage >= 0.93, got


def test_a_backend_spec_of_a_carded_model_gets_its_stratum_and_an_adapter_does_not() -> None:
    """``hf:smollm2-135m?batch=16`` runs the card's smollm2-135m weights, so it is
    corrected with that stratum; an adapter trained on top is other weights and is
    marked as a model the card has not seen."""
    card = _card()
    plain = stratified_rate(_cell(13, 50), card, "gsm8k", "smollm2-135m", "smollm")
    via_hf = stratified_rate(_cell(13, 50), card, "gsm8k", "hf:smollm2-135m?batch=16", "smollm")
    assert via_hf.strata == plain.strata == {"dataset": "gsm8k", "model": "smollm2-135m"}
    assert via_hf.rate == plain.rate and via_hf.note == ""
    for adapter in ("hf:smollm2-135m+sft-user", "hf:smollm2-135m?adapter=/runs/sft"):
        got = stratified_rate(_cell(13, 50), card, "gsm8k", adapter, "smollm")
        assert got.strata["model"] is None and "extrapolated" in got.note
