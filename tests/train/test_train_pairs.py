"""Self-play pair extraction: the pairing rules, and a real run store end to end.

Run: ``.venv/bin/python -m pytest tests/train/test_train_pairs.py -q``. The real-store test
shares the session's probe run (2 GSM8K items, k=4, llama.cpp; about half a minute).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from userturn.cli import main
from userturn.errors import UserError
from userturn.rundir.records import Transcript, UserTurnRecord
from userturn.train.pairs import extract_pairs, pick_judge, run_records
from userturn.types import Judgment

CONTEXT = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]


def record(
    item: str,
    sample: int,
    text: str,
    verdicts: dict[str, tuple[str, bool | None]],
    temperature: float = 1.0,
) -> Transcript:
    turn = UserTurnRecord(
        key=f"{item}-{sample}-{temperature}",
        answer_key="a",
        item_id=item,
        model="m",
        dataset="gsm8k",
        config="c",
        temperature=temperature,
        sample=sample,
        seed=sample,
        perturbation="none",
        messages=tuple(CONTEXT),
        user_turn=text,
    )
    labels: dict[bool | None, Any] = {True: "plausible_followup", False: "degenerate_short"}
    return Transcript(
        turn,
        tuple(Judgment(j, g, labels.get(g), "", st) for j, (st, g) in verdicts.items()),  # type: ignore[arg-type]
    )


def test_pairs_stay_within_a_context_and_one_judge() -> None:
    recs = [
        record("a", 0, "good one", {"rules": ("ok", True), "llm": ("ok", False)}),
        record("a", 1, "bad one", {"rules": ("ok", False), "llm": ("ok", True)}),
        record("a", 2, "unknown", {"rules": ("unparseable", None)}),
        record("b", 0, "only good", {"rules": ("ok", True)}),
    ]
    pairs, stats = extract_pairs(recs, "rules")
    assert [(p["chosen"], p["rejected"], p["item_id"]) for p in pairs] == [
        ("good one", "bad one", "a")
    ]
    assert (stats.contexts, stats.with_both, stats.genuine, stats.rejected, stats.not_ok) == (
        2,
        1,
        2,
        1,
        1,
    )
    flipped, _ = extract_pairs(recs, "llm")
    assert [(p["chosen"], p["rejected"]) for p in flipped] == [("bad one", "good one")]


def test_round_robin_cap_and_duplicate_texts() -> None:
    recs = [
        record("a", 0, "g0", {"rules": ("ok", True)}),
        record("a", 1, "g1", {"rules": ("ok", True)}),
        record("a", 2, "b0", {"rules": ("ok", False)}),
        record("a", 3, "b1", {"rules": ("ok", False)}),
        record("a", 4, "b1", {"rules": ("ok", False)}),  # same text: one rejected
        record("a", 0, "b2", {"rules": ("ok", False)}, temperature=0.0),
    ]
    pairs, stats = extract_pairs(recs, "rules", max_per_context=3)
    got = [(p["chosen"], p["rejected"]) for p in pairs]
    assert got == [("g0", "b2"), ("g1", "b2"), ("g0", "b0")]
    assert stats.rejected == 3
    assert len({p["id"] for p in pairs}) == 3


def test_pick_judge_needs_a_choice_among_several() -> None:
    recs = [record("a", 0, "x", {"rules": ("ok", True), "llm": ("ok", True)})]
    with pytest.raises(UserError, match="pick one with --judge"):
        pick_judge(recs, None)
    with pytest.raises(UserError, match="no judgments"):
        pick_judge(recs, "cascade:x")
    assert pick_judge(recs, "llm") == "llm"


def verdict(rec: Transcript, judge: str) -> Judgment:
    v = rec.verdict(judge)
    assert v is not None
    return v


def test_pairs_from_a_real_run_store(probe_run: Path, tmp_path: Path) -> None:
    """Every pair is (genuine, not genuine) by the run's own judge within one context,
    and the count is what the verdicts allow; ``export pairs`` writes exactly these."""
    records = run_records(probe_run)
    assert len(records) == 8
    by_id = {r.turn.key: r for r in records}
    pairs, stats = extract_pairs(records, "rules")
    assert stats.genuine + stats.rejected + stats.not_ok <= 8
    expected = 0
    for item in {r.turn.item_id for r in records}:
        ok = [verdict(r, "rules") for r in records if r.turn.item_id == item]
        ok = [v for v in ok if v.status == "ok"]
        g = sum(bool(v.genuine) for v in ok)
        expected += min(g * (len(ok) - g), 4)
    assert stats.pairs == len(pairs) <= expected
    for p in pairs:
        chosen, rejected = by_id[p["chosen_id"]], by_id[p["rejected_id"]]
        assert chosen.turn.item_id == rejected.turn.item_id == p["item_id"]
        assert verdict(chosen, "rules").genuine is True
        assert verdict(rejected, "rules").genuine is False
        assert p["messages"] == list(chosen.turn.messages) == list(rejected.turn.messages)
    out = tmp_path / "pairs.jsonl"
    assert main(["export", "pairs", "--run", str(probe_run), "--out", str(out)]) == 0
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [x["id"] for x in lines] == [p["id"] for p in pairs]


def test_export_pairs_errors_are_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["export", "pairs", "--run", str(tmp_path), "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and "store.sqlite" in err and err.count("\n") == 1
