"""Perturbations: canonical names, word-boundary truncation, appended question.

Run: ``.venv/bin/python -m pytest tests/perturb -q`` (pure logic, < 1 s).
"""

from __future__ import annotations

import pytest

from userturn.errors import UserError
from userturn.perturb import load_perturbation
from userturn.registry import PERTURBATIONS


def test_none_is_identity_and_named_none() -> None:
    p = load_perturbation("none")
    assert p.id == "none"
    assert p.apply("  keep\nme exactly  ") == "  keep\nme exactly  "


@pytest.mark.parametrize(
    ("spec", "canonical"),
    [
        ("truncate", "truncate:0.5"),
        ("truncate:0.50", "truncate:0.5"),
        ("truncate:.25", "truncate:0.25"),
        ("append-question", "append-question:Does that make sense?"),
        ("append-question:Any questions?", "append-question:Any questions?"),
    ],
)
def test_canonical_names_round_trip(spec: str, canonical: str) -> None:
    p = load_perturbation(spec)
    assert p.id == canonical
    assert load_perturbation(p.id).id == canonical  # stored names load back to themselves


def test_truncate_cuts_at_a_word_boundary() -> None:
    text = "The answer is 18 because 16 - 3 - 4 = 9 and 9 * 2 = 18."
    out = load_perturbation("truncate:0.5").apply(text)
    words = text.split()
    assert out == " ".join(words[: len(words) // 2])
    assert text.startswith(out) and text[len(out)] == " "  # never mid-word


def test_truncate_keeps_original_whitespace_and_markup() -> None:
    text = "Step 1:\n  add <b>2</b>\n\nStep 2: done now"
    out = load_perturbation("truncate:0.5").apply(text)
    assert out == "Step 1:\n  add <b>2</b>"


def test_truncate_always_keeps_at_least_one_word() -> None:
    assert load_perturbation("truncate:0.01").apply("alpha beta gamma") == "alpha"
    # one word cannot be cut at a word boundary: the answer is left as is
    assert load_perturbation("truncate:0.5").apply("  42  ") == "  42  "


@pytest.mark.parametrize(
    "bad", ["truncate:0", "truncate:1", "truncate:1.5", "truncate:x", "truncate:-0.2"]
)
def test_truncate_rejects_bad_fractions(bad: str) -> None:
    with pytest.raises(UserError, match="perturb"):
        load_perturbation(bad)


def test_append_question_appends_after_a_blank_line() -> None:
    out = load_perturbation("append-question").apply("The answer is 18.\n\n")
    assert out == "The answer is 18.\n\nDoes that make sense?"
    custom = load_perturbation("append-question:Shall I go on?").apply("Done.")
    assert custom.endswith("\n\nShall I go on?")


def test_unknown_perturbation_lists_known_ones() -> None:
    with pytest.raises(UserError) as err:
        load_perturbation("shuffle")
    for name in PERTURBATIONS:
        assert name in str(err.value)
    with pytest.raises(UserError):
        load_perturbation("none:extra")


def test_every_perturbation_declares_its_own_version() -> None:
    """A version inherited from the base class would never be bumped when ``apply``
    changes, so each registered perturbation must declare one itself."""
    for name in PERTURBATIONS:
        cls = type(load_perturbation(name))
        assert isinstance(cls.__dict__.get("version"), str) and cls.__dict__["version"], name


def test_append_question_to_an_empty_answer_is_just_the_question() -> None:
    assert load_perturbation("append-question").apply("  \n") == "Does that make sense?"
