"""Letter extraction on the answer shapes models really produce.

Run: ``.venv/bin/python -m pytest tests/scoring/test_multiple_choice.py -q``
"""

from __future__ import annotations

import pytest

from userturn.scoring.multiple_choice import extract_letter, score_choice

REASONING = (
    "Let's consider each option. Option A says 10 m, which would be g*t/2, not g*t^2/2. "
    "B) 40 m doubles the correct value. (D) is too small.\n"
    "The distance is d = 1/2 * 10 * 2^2 = 20 m.\n\n"
)


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        ("Answer: C", "C"),
        (REASONING + "Answer: C", "C"),
        (REASONING + "**Answer:** (B)", "B"),
        (REASONING + "The answer is D.", "D"),
        (REASONING + "Therefore the final answer is $\\boxed{A}$.", "A"),
        (REASONING + "\\boxed{\\text{C}}", "C"),
        ("the correct answer is option C", "C"),
        ("After comparing them, option B is correct.", "B"),
        (REASONING + "C", "C"),
        (REASONING + "(C)", "C"),
        ("So my choice:\n**D**", "D"),
        ("answer: c", "C"),
        ("Answer: (b)", "B"),
        ("ANSWER: C", "C"),
        ("The answer is C, because the others contradict the data.", "C"),
        ("(A) looks plausible at first.\nAnswer: D", "D"),
        ("The answer is a bit subtle, but I pick (B).", "B"),
        ("I would pick B because it is the largest.", "B"),
        ("Vitamin D matters here. The answer is B", "B"),
        ("The best choice is C", "C"),
        ("Answer: C\n\nWait, re-checking the units, Answer: A", "A"),
    ],
)
def test_extract_letter(text: str, letter: str) -> None:
    assert extract_letter(text) == letter


@pytest.mark.parametrize(
    "text",
    [
        "I don't know.",
        "A good approach is to think about energy conservation.",
        "",
    ],
)
def test_no_letter_is_none_not_a_guess(text: str) -> None:
    assert extract_letter(text) is None


def test_option_text_on_the_last_line_names_the_option() -> None:
    options = ["40 m", "20 m", "10 m", "5 m"]
    text = "Using d = g t^2 / 2:\nIt falls 20 m."
    assert extract_letter(text, options) == "B"
    assert extract_letter("It falls 20 m or 10 m.", options) is None  # ambiguous


def test_score_choice_records_what_it_read() -> None:
    assert score_choice(REASONING + "Answer: C", "C") == {
        "correct": True,
        "extracted": "C",
        "gold": "C",
    }
    assert score_choice("no idea", "C") == {"correct": False, "extracted": None, "gold": "C"}
