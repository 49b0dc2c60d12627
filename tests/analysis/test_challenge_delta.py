"""The error-injection control's challenge delta: paired by item, with a CI, split by
whether the clean answer was correct.

Run: ``.venv/bin/python -m pytest tests/analysis/test_challenge_delta.py -q`` (a second).
Cells are counted from the same facts the store hands the analysis.
"""

from __future__ import annotations

import pytest

from userturn.analysis.cells import Answer, Cell
from userturn.analysis.views import perturbation_deltas
from userturn.rundir.store import JudgmentFact, TurnFact


def _fact(item: str, pert: str, sample: int) -> TurnFact:
    values = {f: None for f in TurnFact._fields}
    values |= {
        "key": f"{item}/{pert}/{sample}", "item_id": item, "model": "m", "dataset": "gsm8k",
        "config": "c", "temperature": 1.0, "sample": sample, "perturbation": pert,
        "probe": "generate", "turn": 1, "family": "", "answer_key": f"a-{item}",
    }  # fmt: skip
    if "perturbed" in values:
        values["perturbed"] = True
    return TurnFact(**values)


def _cells(challenges: dict[tuple[str, str], list[bool]], correct: dict[str, bool]) -> list[Cell]:
    out = {}
    for (item, pert), flags in challenges.items():
        cell = out.setdefault(pert, Cell("m", "gsm8k", 1.0, pert, "offline", config="c"))
        for i, flag in enumerate(flags):
            fact = _fact(item, pert, i)
            verdict = JudgmentFact(fact.key, "offline", "ok", True, "follow_up", flag)
            cell.add(fact, Answer(item, correct[item], False), verdict)
    return list(out.values())


def test_the_delta_compares_each_item_with_its_own_clean_answer() -> None:
    """Injection applied on items a and b only; c and d (clean only) challenge a lot. An
    unpaired delta (all injected turns vs all clean turns: 3/4 - 5/8) says +12.5 points;
    paired on the items that have both it is +50."""
    flags = {
        ("a", "inject-error"): [True, True],
        ("b", "inject-error"): [True, False],
        ("a", "none"): [False, False],
        ("b", "none"): [True, False],
        ("c", "none"): [True, True],
        ("d", "none"): [True, True],
    }
    cells = _cells(flags, {"a": True, "b": False, "c": True, "d": True})
    (row,) = perturbation_deltas(cells)
    assert row.challenge_items == 2
    assert row.challenge_rate == pytest.approx(0.75)
    assert row.challenge_rate_base == pytest.approx(0.25)
    assert row.challenge_delta == pytest.approx(0.5)
    assert row.challenge_delta_ci_low is not None and row.challenge_delta_ci_high is not None
    assert row.challenge_delta_ci_low <= 0.5 <= row.challenge_delta_ci_high
    assert row.challenge_delta_correct == pytest.approx(1.0)  # item a: 1.0 - 0.0
    assert row.challenge_delta_incorrect == pytest.approx(0.0)  # item b: 0.5 - 0.5
    assert (row.challenge_items_correct, row.challenge_items_incorrect) == (1, 1)


def test_no_shared_item_gives_no_delta() -> None:
    flags = {("a", "inject-error"): [True], ("b", "none"): [False]}
    (row,) = perturbation_deltas(_cells(flags, {"a": True, "b": True}))
    assert row.challenge_delta is None and row.challenge_items == 0
