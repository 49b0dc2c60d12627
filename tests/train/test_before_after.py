"""The post-training comparison table (``train.evaluate.before_after_table``) on runs of
known outcomes: each side's judge-corrected rate with its CI, and the corrected Δ.

The runs are synthetic (``tests/synthetic_runs.py``: the real store, the shipped rules
card), so the expected numbers follow from the outcomes; no model is loaded.
Run: ``.venv/bin/python -m pytest tests/train/test_before_after.py -q`` (seconds).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from synthetic_runs import Spec, build_run
from userturn.analysis.cards import CARDS_DIR
from userturn.analysis.cell import GenerateCell, cell_from_json
from userturn.analysis.compare import SHARED_ERRORS, CompareRow, compare_runs
from userturn.analysis.tables import rate_ci
from userturn.judges.card import card_filename, load_card
from userturn.judges.rules import RulesJudge
from userturn.spec import Spec as SpecOf
from userturn.train.evaluate import CORRECTED_COLUMNS, before_after_table

ITEMS = 12


def _share(genuine_of: int):  # type: ignore[no-untyped-def]
    """Items i < ``genuine_of`` write a genuine turn on every sample, the rest never."""

    def outcome(m: str, i: int, t: float, s: int, p: str) -> tuple[str, bool, str]:
        genuine = i < genuine_of
        return "ok", genuine, "plausible_followup" if genuine else "previous_turn_restate"

    return outcome


def _run(path: Path, model: str, genuine_of: int) -> Path:
    """A run judged by "rules" at T=1, k=2, with the shipped rules card written into it
    (as ``judge card --run DIR`` would), since synthetic verdicts carry no version."""
    version = RulesJudge(SpecOf(kind="rules", target="", raw="rules")).version
    card = load_card("rules", version)
    assert card is not None
    (path / CARDS_DIR).mkdir(parents=True)
    (path / CARDS_DIR / card_filename("rules")).write_text(json.dumps({**card, "version": ""}))
    spec = Spec(
        models={model: "smollm"},
        datasets=("gsm8k",),
        items=ITEMS,
        temps=(1.0,),
        k=2,
        perts=("none",),
        outcome=_share(genuine_of),
    )
    return build_run(path, spec)


def _cell(run: Path) -> GenerateCell:
    (cell,) = [cell_from_json(c) for c in json.loads((run / "summary.json").read_text())["cells"]]
    assert isinstance(cell, GenerateCell)
    return cell


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("before_after")
    return _run(base / "before", "base", 4), _run(base / "after", "tuned", 9)


def _table_row(row: CompareRow, before: GenerateCell, after: GenerateCell) -> dict[str, str]:
    table = before_after_table([row], [before], [after])
    assert set(CORRECTED_COLUMNS) <= set(table.columns)
    return dict(zip(table.columns, table.shown[0], strict=True))


def test_each_side_carries_its_run_tables_corrected_rate(sides: tuple[Path, Path]) -> None:
    """The corrected rate per side is the one its own run's summary.json prints."""
    before, after = (_cell(p) for p in sides)
    (row,) = compare_runs(*sides)
    assert (row.rate_a, row.rate_b) == (pytest.approx(4 / ITEMS), pytest.approx(9 / ITEMS))
    assert row.judge_card is not None and row.judge_card == before.judge_card
    for side, cell in (("a", before), ("b", after)):
        assert cell.rate_corrected is not None and cell.ci_corrected_low is not None
        assert getattr(row, f"rate_corrected_{side}") == cell.rate_corrected
        assert getattr(row, f"rate_corrected_ci_low_{side}") == cell.ci_corrected_low
        assert getattr(row, f"rate_corrected_ci_high_{side}") == cell.ci_corrected_high
    # the rules card's false positives lift a 33% judged rate, so the correction lowers it
    assert before.rate_corrected is not None and 0 < before.rate_corrected < 4 / ITEMS
    shown = _table_row(row, before, after)
    assert shown["corrected before [95% CI]"] == rate_ci(
        before.rate_corrected, before.ci_corrected_low, before.ci_corrected_high
    )
    assert shown["corrected after [95% CI]"] == rate_ci(
        after.rate_corrected, after.ci_corrected_low, after.ci_corrected_high
    )


def test_the_corrected_change_is_the_raw_one_over_youdens_j(sides: tuple[Path, Path]) -> None:
    """Both sides share the card's strata (same dataset, a model the card lacks), so the
    judge's specificity term cancels: Δ corrected = Δ raw / (se + sp − 1), paired by item,
    and it matches the difference of the two corrected rates; a raw +42 points from a
    judge with J < 1 is a larger true change."""
    before, after = (_cell(p) for p in sides)
    (row,) = compare_runs(*sides)
    assert before.correction_strata == after.correction_strata
    assert row.rate_corrected_method == SHARED_ERRORS
    assert row.rate_diff == pytest.approx(5 / ITEMS)
    se, sp = before.correction_sensitivity, before.correction_specificity
    assert se is not None and sp is not None and 0 < se + sp - 1 < 1
    d, lo, hi = (
        row.rate_corrected_diff,
        row.rate_corrected_diff_ci_low,
        row.rate_corrected_diff_ci_high,
    )
    assert d is not None and lo is not None and hi is not None
    assert d == pytest.approx(5 / ITEMS / (se + sp - 1), rel=0.02)
    assert before.rate_corrected is not None and after.rate_corrected is not None
    assert d == pytest.approx(after.rate_corrected - before.rate_corrected, abs=0.02)
    assert d > row.rate_diff and lo <= d <= hi
    # the card lacks these models, so J is drawn from the spread between its strata: the
    # corrected interval is wider than the raw one
    assert row.rate_ci_low is not None and row.rate_ci_high is not None
    assert hi - lo > row.rate_ci_high - row.rate_ci_low
    shown = _table_row(row, before, after)
    assert shown["Δ corrected pts [95% CI]"] == (
        f"{100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
    )


def test_without_per_item_data_the_corrected_change_has_no_interval(
    sides: tuple[Path, Path], tmp_path: Path
) -> None:
    """Runs copied without their store keep only summary.json: no items to pair, so the
    corrected Δ is the difference of the corrected rates, without a CI, and says why."""
    copies = []
    for side in sides:
        copy = tmp_path / side.name
        shutil.copytree(side, copy)
        (copy / "store.sqlite").unlink()
        copies.append(copy)
    before, after = (_cell(p) for p in copies)
    (row,) = compare_runs(*copies)
    assert before.rate_corrected is not None and after.rate_corrected is not None
    assert row.rate_corrected_diff == pytest.approx(after.rate_corrected - before.rate_corrected)
    assert row.rate_corrected_diff_ci_low is None and row.rate_corrected_diff_ci_high is None
    assert row.rate_corrected_method == "no CI: no per-item data"
    shown = _table_row(row, before, after)
    assert shown["Δ corrected pts [95% CI]"] == f"{100 * row.rate_corrected_diff:+.1f}"


def test_sides_with_different_cards_of_one_judge_version_are_not_paired(
    sides: tuple[Path, Path], tmp_path: Path
) -> None:
    """One judge version can have two cards (its reference files grew, or a run carries
    a card of its own): same ``card_id``, other counts. The sides then rest on different
    error rates, so the corrected Δ has no CI, and each side's digest names its card."""
    before, after = sides
    other = tmp_path / "after-other-card"
    shutil.copytree(after, other)
    path = other / CARDS_DIR / card_filename("rules")
    card = json.loads(path.read_text())
    card["sigma"] = {**card["sigma"], "fp": card["sigma"]["fp"] + 5, "tn": card["sigma"]["tn"] - 5}
    path.write_text(json.dumps(card))
    (row,) = compare_runs(before, other)
    assert row.rate_corrected_method == "no CI: sides corrected with different cards"
    assert row.rate_corrected_diff_ci_low is None and row.rate_corrected_diff_ci_high is None
    (same,) = compare_runs(before, after)
    assert same.rate_corrected_method == SHARED_ERRORS
    assert _cell(before).judge_card_sha == _cell(after).judge_card_sha is not None
