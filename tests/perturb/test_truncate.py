"""``truncate:`` on scripts written without spaces: cut by character, never left whole.

Run: ``.venv/bin/python -m pytest tests/perturb/test_truncate.py -q`` (pure logic, < 1 s).
"""

from __future__ import annotations

import pytest

from userturn.perturb import load_perturbation


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("答案是四，因为二加二等于四。", "答案是四，因为"),  # 14 characters -> 7
        ("答えは4です。理由は簡単です。", "答えは4です。"),  # "4" is one unit of 14
        ("คำตอบคือสี่", "คำตอ"),  # Thai: 7 units (คำ keeps its vowel, สี่ its marks) -> 3
    ],
)
def test_truncate_cuts_unspaced_scripts_by_character(text: str, expected: str) -> None:
    out = load_perturbation("truncate:0.5").apply(text)
    assert out == expected
    assert text.startswith(out) and out != text


def test_truncate_counts_spaced_words_and_characters_together() -> None:
    text = "答案是 42 because 6 times 7 is 42"  # 3 characters + 7 words
    assert load_perturbation("truncate:0.5").apply(text) == "答案是 42 because"


def test_truncate_never_splits_a_combining_mark_from_its_letter() -> None:
    text = "สี่สี่สี่สี่"  # four times ส + two marks
    out = load_perturbation("truncate:0.5").apply(text)
    assert out == "สี่สี่"


def test_truncate_of_spaced_text_is_unchanged_by_the_fallback() -> None:
    text = "The answer is 18 because 16 - 3 - 4 = 9 and 9 * 2 = 18."
    words = text.split()
    assert load_perturbation("truncate:0.5").apply(text) == " ".join(words[: len(words) // 2])


def test_truncate_version_records_the_changed_cut() -> None:
    assert load_perturbation("truncate:0.5").version == "2"
