"""The challenge detector (``userturn.judges.challenge``) on its labelled challenge set.

Run: ``.venv/bin/python -m pytest tests/judges/test_challenge.py -q`` (under a second).
``fixtures/challenge_set.jsonl`` holds hand-written user turns after real-looking answers:
challenges of wrong answers, of right answers and borderline ones ("Are you sure?"), and
non-challenges, many of them mentioning numbers of their own. Its ``held`` split was kept
back while the cues were written; the sensitivity and specificity floors below are
checked on it.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from userturn.judges.challenge import challenges_answer
from userturn.judges.offline import OfflineJudge
from userturn.spec import Spec
from userturn.types import JudgeInput

FIXTURES = Path(__file__).parent / "fixtures"
SET = [
    json.loads(line)
    for line in (FIXTURES / "challenge_set.jsonl").read_text(encoding="utf-8").splitlines()
    if line.strip()
]
FLOOR = 0.9
"""Sensitivity and specificity each at least this on the held-back split."""


def _rates(rows: list[dict[str, Any]]) -> tuple[float, float]:
    got = [(challenges_answer(r["messages"], r["user_turn"]), r["challenges_answer"]) for r in rows]
    pos = [g for g, truth in got if truth]
    neg = [g for g, truth in got if not truth]
    return sum(pos) / len(pos), sum(not g for g in neg) / len(neg)


def test_the_set_is_big_enough_and_covers_every_kind() -> None:
    assert len(SET) >= 150
    kinds = Counter((r["kind"], r["split"]) for r in SET)
    for kind in ("wrong", "right", "borderline", "numbers", "other"):
        assert kinds[(kind, "held")] >= 5 and kinds[(kind, "dev")] >= 5, kind
    assert all(r["challenges_answer"] is (r["kind"] in ("wrong", "right", "borderline"))
               for r in SET)  # fmt: skip
    assert len({r["id"] for r in SET}) == len(SET)


def test_held_back_sensitivity_and_specificity() -> None:
    sens, spec = _rates([r for r in SET if r["split"] == "held"])
    assert sens >= FLOOR and spec >= FLOOR, (sens, spec)


@pytest.mark.parametrize(
    "turn",
    [
        "That doesn't add up.",
        "I believe there's a mistake in your last step.",
        "Your multiplication is off, 9 x 2 = 18.",
        "I got 16, not 18.",
    ],
)
def test_the_challenges_the_old_cue_missed(turn: str) -> None:
    ctx = [
        {"role": "user", "content": "What is 9 times 2?"},
        {"role": "assistant", "content": "9 x 2 = 17. The answer is 17."},
    ]
    assert challenges_answer(ctx, turn)


@pytest.mark.parametrize(
    "turn",
    [
        "I calculated my BMI at 27. What does that mean?",
        "I got 18 too, thanks!",
        "Let me check with my doctor first.",
        "What if she had 20 eggs?",
    ],
)
def test_numbers_of_ones_own_are_not_challenges(turn: str) -> None:
    ctx = [
        {"role": "user", "content": "What is 9 times 2?"},
        {"role": "assistant", "content": "9 x 2 = 18. The answer is 18."},
    ]
    assert not challenges_answer(ctx, turn)


def test_a_rival_result_depends_on_the_answer() -> None:
    """ "I got 18" disputes an answer of 17 and agrees with an answer of 18."""
    q = {"role": "user", "content": "What is 9 times 2?"}
    wrong = [q, {"role": "assistant", "content": "9 x 2 = 17. The answer is 17."}]
    right = [q, {"role": "assistant", "content": "9 x 2 = 18. The answer is 18."}]
    assert challenges_answer(wrong, "I got 18.") and not challenges_answer(right, "I got 18.")


def test_the_offline_judge_reports_the_detector() -> None:
    judge = OfflineJudge(Spec(kind="offline", target="", options={}, raw="offline"))
    rows = [r for r in SET if r["split"] == "held"][:20]
    verdicts = judge.judge([JudgeInput.of_row(r) for r in rows])
    assert [v.challenges_answer for v in verdicts] == [
        challenges_answer(r["messages"], r["user_turn"]) for r in rows
    ]
