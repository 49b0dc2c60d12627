"""The additive dataset × model fit of a card's cross counts (analysis.mixed), and its
use in the stratified correction (analysis.strata).

Run: ``.venv/bin/python -m pytest tests/analysis/test_mixed.py -q`` (under a minute:
each fit is a variational optimisation over at most two thousand rows, and the coverage
test refits a simulated card 60 times; ``bench/interval_coverage.py --only crossed``
runs that simulation at full size).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import numpy as np
import pytest
from coverage_sim import Design, coverage, crossed_card, crossed_judged_cell, shipped_crossed_judge

from userturn.analysis import mixed
from userturn.analysis.correction import stratified_rate
from userturn.analysis.strata import error_draws


def _cell(right: int, wrong: int) -> dict[str, int]:
    """One side's counts written on both sides alike: sensitivity = specificity."""
    return {"tp": right, "fn": wrong, "tn": right, "fp": wrong}


CONFOUNDED = crossed_card(
    {
        # the judge reads model "sloppy" badly on every dataset and "clean" well, and
        # "sloppy" wrote most of dataset "chat": chat's marginal stratum looks bad
        "chat": {"sloppy": _cell(60, 40), "clean": _cell(19, 1)},
        "math": {"sloppy": _cell(12, 8), "clean": _cell(95, 5)},
        "code": {"sloppy": _cell(13, 7), "clean": _cell(94, 6)},
        "qa": {"clean": _cell(95, 5)},
    }
)


def _draws(card: dict[str, Any], dataset: str, model: str) -> Any:
    got = error_draws(card, dataset, model, "", np.random.default_rng(0), 4000)
    assert got is not None
    return got


def test_a_model_is_not_blamed_for_the_dataset_it_wrote() -> None:
    """chat's stratum reads 0.66, but its clean turns are read like clean turns
    elsewhere (0.95): the joint fit gives clean-on-chat about 0.9, where the marginal
    anchor (chat's 0.66 moved by clean's deviation) would stay far below it."""
    clean = _draws(CONFOUNDED, "chat", "clean")
    sloppy = _draws(CONFOUNDED, "chat", "sloppy")
    assert clean.strata == {"dataset": "chat", "model": "clean"}
    assert clean.point[0] > 0.85 and clean.point[1] > 0.85
    assert 0.55 < sloppy.point[0] < 0.7  # its own 100 turns: 0.60
    assert clean.unpaired == sloppy.unpaired == ""


def test_a_models_effect_carries_to_a_dataset_it_did_not_write() -> None:
    """sloppy never wrote qa: its qa draws are its effect from the other datasets,
    below clean's on qa, widened by the dataset × model spread, and the note says the
    pair is new while both strata are named."""
    sloppy = _draws(CONFOUNDED, "qa", "sloppy")
    clean = _draws(CONFOUNDED, "qa", "clean")
    assert sloppy.strata == {"dataset": "qa", "model": "sloppy"}
    assert sloppy.unpaired == "dataset 'qa' written by model 'sloppy'"
    assert sloppy.point[0] < clean.point[0] - 0.15
    assert sloppy.sens.std() > clean.sens.std()
    per_item = [(1, 1)] * 30 + [(0, 1)] * 70
    got = stratified_rate(per_item, CONFOUNDED, "qa", "sloppy")
    assert "no reference turns from dataset 'qa' written by model 'sloppy'" in got.note
    assert "extrapolated" not in got.note  # both strata are the card's own


def test_an_unseen_model_or_dataset_draws_from_the_population_and_is_named() -> None:
    seen = _draws(CONFOUNDED, "math", "clean")
    for dataset, model, missing in [
        ("math", "llama-3-8b", "model 'llama-3-8b'"),
        ("mmlu", "clean", "dataset 'mmlu'"),
    ]:
        got = _draws(CONFOUNDED, dataset, model)
        assert missing in got.uncovered and None in got.strata.values()
        assert got.sens.std() > seen.sens.std()


def test_the_fit_is_deterministic_and_cached_by_counts() -> None:
    cells = mixed.cells(CONFOUNDED["strata"]["dataset"], "sens")
    assert cells is not None
    first = mixed.fit(cells)
    mixed.fit.cache_clear()
    assert mixed.fit(cells) == first
    a = _draws(CONFOUNDED, "chat", "clean")
    b = _draws(CONFOUNDED, "chat", "clean")
    assert np.array_equal(a.sens, b.sens) and np.array_equal(a.spec, b.spec)


def test_a_side_the_judge_never_misses_falls_back_to_the_marginal_strata_and_says_so() -> None:
    """statsmodels can't fit a side where every row is right (nothing to learn), so the
    marginal hierarchy is used, and the note says why."""
    card = crossed_card({"a": {"m": {"tp": 5, "fn": 3, "tn": 9, "fp": 0}},
                  "b": {"m": {"tp": 6, "fn": 2, "tn": 8, "fp": 0}}})  # fmt: skip
    with pytest.raises(mixed.NotFit, match="right on all 17 turns"):
        mixed.fit(mixed.cells(card["strata"]["dataset"], "spec") or ())
    got = stratified_rate([(1, 1)] * 4 + [(0, 1)] * 6, card, "a", "m")
    assert got.rate is not None
    assert "the dataset × model fit was not used (the judge is right on all 17" in got.note


def test_a_card_without_cross_counts_uses_the_marginal_strata() -> None:
    card = json.loads(json.dumps(CONFOUNDED))
    for entry in card["strata"]["dataset"].values():
        del entry["by_model"]
    assert mixed.cells(card["strata"]["dataset"], "sens") is None
    marginal = _draws(card, "chat", "clean")
    assert (
        marginal.caveat == "" and marginal.point[0] < _draws(CONFOUNDED, "chat", "clean").point[0]
    )


def _shipped() -> dict[str, Any]:
    text = resources.files("userturn.judges").joinpath("cards", "offline.json").read_text()
    card: dict[str, Any] = json.loads(text)
    return card


def test_the_shipped_card_fits_both_sides() -> None:
    """The shipped offline card has the cross counts, and both sides converge; a SmolLM2
    run on GSM8K is a pair the card holds."""
    anchor = _shipped()["strata"]["dataset"]
    for side in ("sens", "spec"):
        cells = mixed.cells(anchor, side)
        assert cells is not None
        f = mixed.fit(cells)
        assert "gsm8k|smollm2-135m" in f.levels[2]
        assert all(np.isfinite(m) and s > 0 for m, s in f.vcp)


def test_a_pair_with_turns_on_one_side_only_is_not_called_unseen() -> None:
    """sloppy's qa turns here are all non-genuine: the pair has no sensitivity cell, so
    that side draws a fresh cell effect, but the card does hold the pair."""
    card = json.loads(json.dumps(CONFOUNDED))
    card["strata"]["dataset"]["qa"]["by_model"]["sloppy"] = {"tp": 0, "fn": 0, "tn": 8, "fp": 4}
    got = _draws(card, "qa", "sloppy")
    assert got.unpaired == "" and got.uncovered == ()


@pytest.mark.parametrize("target", [("gsm8k", "smollm2-135m"), ("gsm8k", "unseen-model")])
def test_coverage_when_the_judge_errs_as_the_additive_model_of_the_shipped_card(
    target: tuple[str, str],
) -> None:
    """Every effect drawn afresh from the spreads fit to the shipped card, reference
    counts drawn at its cell sizes, the card refit each time; the run is make run's cell
    (or a model the card never saw) at a true 20%."""
    judge = shipped_crossed_judge(_shipped(), target)

    def draw(r: np.random.Generator) -> tuple[float | None, float | None]:
        per_item, card = crossed_judged_cell(r, 0.2, Design(items=50, k=1), judge)
        got = stratified_rate(per_item, card, *target, reps=400)
        if not got.defined:  # says the judge carries no information there: any rate
            return 0.0, 1.0
        return got.ci_low, got.ci_high

    got = coverage(draw, 0.2, 60, seed=11)
    assert got.coverage >= 0.9, got


def _rows(card: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    from userturn.cli.judge_cmd import pair_table

    table = pair_table(card, reps=2000)
    assert table is not None
    return {(r[0], r[1]): dict(zip(table.raw_columns, r, strict=True)) for r in table.rows}


def test_the_pairs_table_shows_what_each_pair_is_corrected_with() -> None:
    """`judge card` prints, per dataset × model pair, the pair's own counts and the se
    the correction draws: clean on chat gets clean's reading (about 0.9), not chat's
    marginal 0.66; each dataset's new-model row and the all-new row are wider."""
    rows = _rows(CONFOUNDED)
    pairs = {(d, m) for d, e in CONFOUNDED["strata"]["dataset"].items() for m in e["by_model"]}
    new = {(d, "(new)") for d in CONFOUNDED["strata"]["dataset"]} | {("(new)", "(new)")}
    assert set(rows) == pairs | new
    clean = rows[("chat", "clean")]
    assert (clean["se_right"], clean["se_turns"], clean["turns"]) == (19, 20, 40)
    assert clean["se"] > 0.85 and clean["se_low"] < clean["se"] < clean["se_high"]
    assert rows[("qa", "(new)")]["turns"] == 0 and rows[("qa", "(new)")]["se_turns"] == 0
    width = {k: r["se_high"] - r["se_low"] for k, r in rows.items()}
    assert width[("qa", "(new)")] > width[("qa", "clean")]
    assert width[("(new)", "(new)")] > width[("qa", "clean")]


def test_the_pairs_table_says_when_the_joint_fit_was_not_used() -> None:
    from userturn.cli.judge_cmd import pair_table

    card = crossed_card({"a": {"m": {"tp": 5, "fn": 3, "tn": 9, "fp": 0}},
                  "b": {"m": {"tp": 6, "fn": 2, "tn": 8, "fp": 0}}})  # fmt: skip
    table = pair_table(card, reps=500)
    assert table is not None and "The dataset × model fit was not used" in table.note
    old = json.loads(json.dumps(CONFOUNDED))
    for entry in old["strata"]["dataset"].values():
        del entry["by_model"]
    assert pair_table(old) is None
