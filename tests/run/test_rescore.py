"""``userturn rescore --run DIR``: stored answers are scored again by the current scorers.

A scorer fixed after a run must not leave the run's accuracy wrong: rescore re-applies
it to every stored answer, says which verdicts changed, and rewrites summary.json and
records.jsonl. Fake backend (the answers are scripted), real store and real gsm8k items.

Run: ``.venv/bin/python -m pytest tests/run/test_rescore.py -q`` (a few seconds).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from userturn.cli import main
from userturn.datasets.gsm8k import GSM8K
from userturn.types import Item


def _accuracy(run: Path) -> list[float | None]:
    cells = json.loads((run / "summary.json").read_text())["cells"]
    return [c["accuracy"] for c in cells]


def test_rescore_applies_a_changed_scorer_and_says_what_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    argv = ["run", "--model", "fake:x", "--limit", "3", "--temperatures", "0", "--judge", "rules"]
    assert main([*argv, "--out", str(run)]) == 0
    assert _accuracy(run) == [0.0]  # the fake model's answers are wrong
    capsys.readouterr()

    assert main(["rescore", "--run", str(run)]) == 0
    assert "3 answers rescored; 0 changed correctness" in capsys.readouterr().out

    def lenient(self: GSM8K, item: Item, final_answer: str) -> dict[str, Any] | None:
        return {"correct": True, "extracted": final_answer[-8:]}

    monkeypatch.setattr(GSM8K, "score", lenient)  # "a scorer fixed after the run"
    assert main(["rescore", "--run", str(run)]) == 0
    said = capsys.readouterr().out
    assert _accuracy(run) == [1.0]
    assert "3 answers rescored; 3 changed correctness" in said
    assert said.count("false -> true") == 3, said
    lines = [json.loads(x) for x in (run / "records.jsonl").open()]
    assert all(r["correct"] is True for r in lines)
    assert main([*argv, "--out", str(run)]) == 0  # a rerun keeps the new scores
    assert _accuracy(run) == [1.0]
