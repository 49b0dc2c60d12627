"""Tests for the offline rules judge (``userturn.judges.rules``).

Run: ``.venv/bin/pytest tests/judges/test_rules.py -q``. The dev-set tests read
``../shared/judge_dev.jsonl`` (``shared/`` is the repository's sibling) and are skipped
with a reason when it is absent. The honest, cross-validated agreement is reported by
``bench/judge_cv.py``; here the in-sample κ only guards against regressions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shared_files import SHARED
from userturn.errors import UserError
from userturn.judges.rules import (
    RulesJudge,
    Thresholds,
    classify,
    fit_thresholds,
    rules_version,
)
from userturn.judges.rules_features import measure
from userturn.spec import Spec
from userturn.stats import kappa as cohen_kappa
from userturn.types import LABELS, JudgeInput, Judgment

FIXTURES = Path(__file__).parent / "fixtures" / "rules_cases.jsonl"
DEV = SHARED / "judge_dev.jsonl"
KAPPA_FLOOR = 0.7
"""In-sample κ on dev is 0.81 with the shipped thresholds; a drop below this is a bug."""


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _inputs(rows: list[dict[str, Any]]) -> list[JudgeInput]:
    return [JudgeInput.of_row(r) for r in rows]


@pytest.fixture(scope="module")
def judge() -> RulesJudge:
    return RulesJudge(Spec(kind="rules", target="", raw="rules"))


@pytest.fixture(scope="module")
def dev_rows() -> list[dict[str, Any]]:
    if not DEV.exists():
        pytest.skip(f"{DEV} not found: check out shared/ beside the repo or set USERTURN_SHARED")
    return _rows(DEV)


FIXTURE_ROWS = _rows(FIXTURES)


@pytest.mark.parametrize("row", FIXTURE_ROWS, ids=[r["id"] for r in FIXTURE_ROWS])
def test_fixture_label(judge: RulesJudge, row: dict[str, Any]) -> None:
    [verdict] = judge.judge(_inputs([row]))
    assert verdict.label == row["label"], f"{row['why']}: {verdict.rationale}"


def test_every_label_but_other_is_covered_by_fixtures() -> None:
    covered = {r["label"] for r in FIXTURE_ROWS}
    assert covered == set(LABELS) - {"other"}


def _check_invariants(verdicts: list[Judgment], n: int) -> None:
    assert len(verdicts) == n
    for v in verdicts:
        assert v.status == "ok"
        assert v.judge == "rules"
        assert v.label in LABELS
        assert v.genuine == (v.label == "plausible_followup")
        assert v.rationale


def test_invariants_on_fixtures(judge: RulesJudge) -> None:
    _check_invariants(judge.judge(_inputs(FIXTURE_ROWS)), len(FIXTURE_ROWS))


def test_invariants_on_dev(judge: RulesJudge, dev_rows: list[dict[str, Any]]) -> None:
    _check_invariants(judge.judge(_inputs(dev_rows)), len(dev_rows))


@pytest.mark.parametrize(
    ("row_id", "label"),
    [
        ("g7cc4a49023", "previous_turn_restate"),  # exact repeat of the user's request
        ("gd98b12aaa9", "assistant_turn_restate"),  # copies the step-by-step solution
        ("g3184897859", "assistant_turn_restate"),  # "To find the number of marbles..."
        ("g0e3239e470", "malformed_artifact"),  # mojibake-laden garbled French
        ("g2fcfdd5741", "malformed_artifact"),  # '告知user' role debris in a loop
        ("g3b0ac09971", "new_task_prompt"),  # Chinese GIS request after a math answer
        ("gcaf8e15415", "new_task_prompt"),  # job application out of nowhere
        ("g2393c9f6a5", "plausible_followup"),  # "shorten this"
        ("g715cc4a182", "plausible_followup"),  # asks how the recursion works
        ("gee7bee5380", "plausible_followup"),  # human answers the clarifying question
    ],
)
def test_real_dev_rows(
    judge: RulesJudge, dev_rows: list[dict[str, Any]], row_id: str, label: str
) -> None:
    [row] = [r for r in dev_rows if r["id"] == row_id]
    [verdict] = judge.judge(_inputs([row]))
    assert verdict.label == label, verdict.rationale


def test_in_sample_kappa_floor(judge: RulesJudge, dev_rows: list[dict[str, Any]]) -> None:
    verdicts = judge.judge(_inputs(dev_rows))
    kappa = cohen_kappa(
        [bool(v.genuine) for v in verdicts], [bool(r["genuine_followup"]) for r in dev_rows]
    )
    assert kappa is not None and kappa >= KAPPA_FLOOR, f"in-sample κ {kappa:.3f} < {KAPPA_FLOOR}"


def test_shipped_thresholds_are_the_dev_fit(dev_rows: list[dict[str, Any]]) -> None:
    """The defaults must be what the fitting procedure gives on dev, not hand-tuned."""
    feats = [measure(r["messages"], r["user_turn"]) for r in dev_rows]
    genuine = [bool(r["genuine_followup"]) for r in dev_rows]
    refit = fit_thresholds(feats, genuine)
    assert refit == Thresholds(), f"features changed: ship the refit defaults {refit}"


def test_rationale_names_rule_and_value() -> None:
    q = "Generate a short summary of the newest childhood immunization schedule changes"
    msgs = ({"role": "user", "content": q}, {"role": "assistant", "content": "Below is..."})
    label, why = classify(measure(msgs, q), Thresholds())
    assert label == "previous_turn_restate"
    assert why == f"content overlap with the user prompt 1.00 >= {Thresholds().restate_overlap:.2f}"


def test_version_follows_the_thresholds() -> None:
    """A verdict's cache key must change when a threshold does, not only on a release."""
    default = RulesJudge(Spec(kind="rules", target="", raw="rules"))
    assert default.version == rules_version(Thresholds())
    assert default.version.startswith("rules-2+")
    wider = RulesJudge(Spec(kind="rules", target="", options={"max_words": "90"}, raw="rules"))
    assert wider.version != default.version


def test_options_override_thresholds() -> None:
    spec = Spec(
        kind="rules",
        target="",
        options={"max_words": "90", "min_grounding": "0.2"},
        raw="rules?max_words=90&min_grounding=0.2",
    )
    t = RulesJudge(spec).thresholds
    assert (t.max_words, t.min_grounding) == (90, 0.2)
    assert isinstance(t.max_words, int)


@pytest.mark.parametrize("options", [{"max_wrods": "9"}, {"max_words": "many"}])
def test_bad_options_fail_loudly(options: dict[str, str]) -> None:
    with pytest.raises(UserError, match="max_w"):
        RulesJudge(Spec(kind="rules", target="", options=options, raw="rules"))


def test_odd_context_does_not_raise(judge: RulesJudge) -> None:
    """No assistant turn, None content: still a verdict, never an exception."""
    odd = [
        JudgeInput("a", (), "Can you explain that again?"),
        JudgeInput("b", ({"role": "user", "content": None},), "What about dogs?"),
    ]
    _check_invariants(judge.judge(odd), 2)


def test_cohen_kappa_edges() -> None:
    assert cohen_kappa([True, False], [True, False]) == 1.0
    assert cohen_kappa([True, True], [True, True]) is None  # undefined, not "no agreement"
    assert cohen_kappa([], []) is None
