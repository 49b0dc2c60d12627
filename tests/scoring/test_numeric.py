"""Numeric answer extraction on real answer formats: GSM8K gold answers, real SmolLM2
outputs (``fixtures/smollm2_gsm8k_answers.jsonl``, generated with ``userturn run``), and
the shapes larger models use (reasoning first, ``\\boxed{}``, "The answer is", ``$``,
commas, trailing period, negatives, decimals).

Run: ``.venv/bin/python -m pytest tests/scoring/test_numeric.py -q``
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from userturn.scoring.numeric import extract_number, gold_number, score_numeric

FIXTURES = Path(__file__).parent / "fixtures"

# Janet's ducks (GSM8K test item 0): reasoning that restates the question's numbers first.
REASONING = (
    "Janet's ducks lay 16 eggs per day. She eats 3 for breakfast and bakes muffins "
    "with 4, so she sells 16 - 3 - 4 = 9 eggs. Each egg sells for $2, so she makes "
    "9 * 2 = 18 dollars per day.\n\n"
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (REASONING + "The answer is 18.", "18"),
        (REASONING + "Therefore, the final answer is $\\boxed{18}$.", "18"),
        (REASONING + "**Final Answer**\n\\[\n\\boxed{18}\n\\]", "18"),
        (REASONING + "\\boxed{\\$18}", "18"),
        (REASONING + "\\boxed{18 \\text{ dollars}}", "18"),
        (REASONING + "\\boxed{9 \\times 2 = 18}", "18"),
        (REASONING + "So she makes $18 every day.", "18"),
        (REASONING + "#### 18", "18"),
        (REASONING + "**Answer:** $18", "18"),
        (REASONING + "Answer: 18 dollars\n\nLet me know if you need anything else!", "18"),
        ("The house costs $1,234,567.50 in total.", "1234567.50"),
        ("So the answer is \\boxed{1{,}200}.", "1200"),
        ("The temperature dropped to -7 degrees. The answer is -7.", "-7"),
        ("The change is \u22125 dollars.", "-5"),
        ("Each slice is 0.25 of the pie, so the answer is .25", "0.25"),
        ("\\boxed{\\frac{3}{4}}", "0.75"),
        ("She ran 3 laps of 400 m. Result: 1200", "1200"),
        ("To answer 3 questions she needs 5 minutes each, 15 minutes in total.", "15"),
        ("The answer is: **42**", "42"),
        ("x = 2 - 7 + 10 = 5", "5"),
    ],
)
def test_extracts_the_final_number(text: str, value: str) -> None:
    assert extract_number(text) == Decimal(value)


def test_no_number_is_none() -> None:
    assert extract_number("I am not sure how to solve this.") is None
    assert score_numeric("no idea", "#### 18") == {
        "correct": False,
        "extracted": None,
        "gold": "18",
    }


def test_equal_values_in_different_formats_are_correct() -> None:
    assert score_numeric("The answer is $18.00.", "... #### 18")["correct"] is True
    assert score_numeric("\\boxed{1,000}", "#### 1000")["correct"] is True
    assert score_numeric("The answer is 17.", "#### 18")["correct"] is False


def test_gold_answers_in_gsm8k_format(tmp_path: Path) -> None:
    gold = (
        "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\n"
        "She makes 9 * 2 = $<<9*2=18>>18 every day at the farmer's market.\n#### 18"
    )
    assert gold_number(gold) == Decimal(18)
    with pytest.raises(ValueError, match="no number"):
        gold_number("no number here")


def test_real_smollm2_outputs() -> None:
    """Real outputs, including ``#### 4`` followed by "The answer is: 4", a repeated
    "The answer is 2.", and answers cut at the token limit with no stated answer (then
    the last number is all there is, and it is wrong, as it should be)."""
    rows = [
        json.loads(line)
        for line in (FIXTURES / "smollm2_gsm8k_answers.jsonl").read_text().splitlines()
    ]
    expected = {
        "gsm8k-11": "4",
        "gsm8k-20": "2",
        "gsm8k-39": "2",
        "gsm8k-43": "2",
        "gsm8k-74": "2",
        "gsm8k-99": "1",
    }
    assert {r["item_id"]: str(extract_number(r["answer"])) for r in rows} == expected
    assert not any(score_numeric(r["answer"], f"#### {r['gold']}")["correct"] for r in rows)
