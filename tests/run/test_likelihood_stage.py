"""The likelihood probe: candidates, records, cells, resume.

Run: ``.venv/bin/python -m pytest tests/run/test_likelihood.py -q`` (a few seconds; one
test scores real HealthBench contexts with the embedded model). The backends' scores
themselves are tested in tests/backends/test_likelihood.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from userturn.config import build_config
from userturn.run.driver import run
from userturn.run.likelihood import candidates, opening, unrelated
from userturn.types import Item

CTX = [
    {"role": "user", "content": "My knee hurts after running. Should I worry?"},
    {
        "role": "assistant",
        "content": "Knee pain after running is common. Rest, ice it. See a doctor if it swells.",
    },
]


def _item(i: str, ref: str | None = "It swelled a bit, is that bad?") -> Item:
    return Item(i, "healthbench", tuple(CTX), reference_turn=ref)


def test_candidates_are_fixed_per_item_and_real_first() -> None:
    pool = [
        _item("a"),
        _item("b"),
        Item("c", "healthbench", ({"role": "user", "content": "Plan a trip to Rome."},)),
    ]
    got = candidates(_item("a"), CTX, pool)
    assert [k for k, _ in got] == [
        "real",
        "previous_turn_restate",
        "assistant_turn_restate",
        "new_task_prompt",
    ]
    assert got[0][1] == "It swelled a bit, is that bad?"
    assert got[1][1] == CTX[0]["content"]  # verbatim
    assert got[2][1] == "Knee pain after running is common."
    assert (
        got[3][1] == unrelated(_item("a"), pool) == "Plan a trip to Rome."
        or got[3][1] == CTX[0]["content"]
    )
    assert candidates(_item("a"), CTX, pool) == got  # deterministic
    assert candidates(_item("a", ref=None), CTX, pool) == []  # no real turn: not probed


def test_opening_is_the_first_sentence_capped() -> None:
    assert opening("First. Second.") == "First."
    assert len(opening("word " * 100).split()) == 40


def test_probe_on_the_embedded_model_writes_records_cells_and_resumes(tmp_path: Path) -> None:
    cfg = build_config(
        {
            "models": ["smollm2-135m"],
            "datasets": ["healthbench"],
            "limit": 3,
            "probe": "likelihood",
            "judges": [],
        }
    )
    res = run(cfg, tmp_path / "r")
    (cell,) = [c for c in res.cells if c.probe == "likelihood"]
    assert cell.n == 3 and cell.judge is None and cell.temperature is None
    assert cell.preference_accuracy is not None and cell.margin is not None
    assert cell.margin_ci_low is not None and cell.margin_ci_low <= cell.margin
    lines = [json.loads(x) for x in (tmp_path / "r" / "records.jsonl").read_text().splitlines()]
    assert len(lines) == 3 and all(x["probe"] == "likelihood" for x in lines)
    for x in lines:
        real = x["candidates"][0]
        best = max(c["mean_logprob"] for c in x["candidates"][1:])
        assert x["margin"] == pytest.approx(real["mean_logprob"] - best)
        assert x["prefers_real"] == (real["mean_logprob"] > best)
        assert all(c["n_tokens"] > 0 and c["logprob"] < 0 for c in x["candidates"])
    assert res.stats.extra["likelihood_scored"] == 3
    again = run(cfg, tmp_path / "r")
    assert again.stats.model_calls == 0 and again.stats.extra["likelihood_reused"] == 3
