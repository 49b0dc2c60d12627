"""``userturn recover``: a store rebuilt from records.jsonl gives back the same run.

Runs are made with the real CLI on the ``fake:`` backend (generate probe with
``inject-error`` applied and not applied, likelihood probe, best-of-N rollouts, rules
judge); the store is then deleted or zeroed, recovered, and the outputs it writes must
equal the originals byte for byte.

Run: ``.venv/bin/python -m pytest tests/run/test_repair.py -q`` (under 10 seconds).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest

from userturn.cli import main
from userturn.errors import UserError
from userturn.run.likelihood import LikelihoodRecord, ScoredCandidate
from userturn.run.records import AnswerRecord, UserTurnRecord, record_line
from userturn.run.repair import parse_line, recover
from userturn.types import Judgment

GENERATE = [
    *("run", "--model", "fake:x", "--dataset", "gsm8k", "--dataset", "healthbench"),
    *("--limit", "2", "--temperatures", "0", "--perturb", "inject-error", "--judge", "rules"),
]
"""gsm8k has gold answers (inject-error applies); healthbench is held out (it can't)."""
LIKELIHOOD = ["likelihood", "--model", "fake:x", "--dataset", "healthbench", "--limit", "2"]
ROLLOUT = [
    *("rollout", "--model", "fake:x", "--dataset", "gsm8k", "--limit", "2", "--turns", "2"),
    *("--best-of", "2", "--user-temperature", "1.0", "--judge", "rules"),
]
PROBES = {"generate": [GENERATE], "all": [GENERATE, LIKELIHOOD, ROLLOUT]}

UNWRITTEN_TURN = {
    "perturbation_version",
    "user_tokens",
    "prompt_tokens",
    "prompt_tokens_reused",
    "context_model",
}
"""UserTurnRecord fields record_line does not write (so no recover can restore them)."""
UNWRITTEN_ANSWER = {
    "completion_tokens",
    "prompt_sha",
    "template_sha",
    "prompt_tokens",
    "prompt_tokens_reused",
    "score",
}
UNWRITTEN_LIKELIHOOD = {"prompt_tokens", "prompt_tokens_reused"}


def _invoke(out: Path, commands: list[list[str]]) -> list[int]:
    """Run each command into ``out``; return each invocation's model calls."""
    calls = []
    for cmd in commands:
        assert main([*cmd, "--out", str(out), "--keep-configs"]) == 0
        stats = json.loads((out / "run_stats.json").read_text())
        calls.append(stats["model_calls"])
    return calls


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One run directory per probe set, made once for the module."""
    base = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(base)
        for name, commands in PROBES.items():
            _invoke(base / name, commands)
    return {name: base / name for name in PROBES}


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _damage(store: Path, how: str) -> None:
    if how == "deleted":
        store.unlink()
    else:
        store.write_bytes(b"")


@pytest.mark.parametrize("damage", ["deleted", "zeroed"])
@pytest.mark.parametrize("probes", list(PROBES))
def test_recover_gives_back_the_same_records_and_summary(
    runs: dict[str, Path], tmp_path: Path, probes: str, damage: str
) -> None:
    out = tmp_path / "run"
    shutil.copytree(runs[probes], out)
    records = (out / "records.jsonl").read_bytes()
    summary = json.loads((out / "summary.json").read_text())
    lines = _lines(out / "records.jsonl")
    applied = [d["applied"] for ln in lines if (d := ln.get("perturbation_detail"))]
    assert True in applied and False in applied  # the run holds both kinds of turn
    assert sum(c["n_not_applied"] for c in summary["cells"]) == applied.count(False)
    _damage(out / "store.sqlite", damage)

    res = recover(out)

    assert (out / "records.jsonl").read_bytes() == records
    assert json.loads((out / "summary.json").read_text()) == summary
    assert res.user_turns + res.likelihoods == len(lines)
    assert res.likelihoods == sum(ln["probe"] == "likelihood" for ln in lines)
    assert _invoke(out, PROBES[probes]) == [0] * len(PROBES[probes])
    assert (out / "records.jsonl").read_bytes() == records


def test_the_all_probes_run_holds_what_recover_must_keep(runs: dict[str, Path]) -> None:
    """The fixture's run has likelihood lines and best-of-N candidates (else the test
    above would prove nothing about them)."""
    lines = _lines(runs["all"] / "records.jsonl")
    assert any(ln["probe"] == "likelihood" for ln in lines)
    assert any(ln["probe"] == "rollout" and ln["candidates"] for ln in lines)


def test_a_store_with_only_likelihood_records_is_kept_without_force(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        _invoke(out, [LIKELIHOOD])
    with pytest.raises(UserError, match="--force"):
        recover(out)
    records = (out / "records.jsonl").read_bytes()
    assert recover(out, force=True).likelihoods == 2
    assert (out / "records.jsonl").read_bytes() == records


def test_a_bad_line_names_its_line_and_field_and_touches_nothing(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    shutil.copytree(runs["all"], out)
    lines = _lines(out / "records.jsonl")
    lines[1]["perturbation_detail"] = "applied"
    (out / "records.jsonl").write_text("".join(json.dumps(ln) + "\n" for ln in lines))
    (out / "store.sqlite").write_bytes(b"")
    with pytest.raises(UserError) as err:
        recover(out)
    assert err.value.line == 2 and err.value.field == "perturbation_detail"
    assert (out / "store.sqlite").read_bytes() == b""
    assert sorted(p.name for p in out.glob("store.sqlite*")) == ["store.sqlite"]


def _every_field_set() -> tuple[UserTurnRecord, AnswerRecord, Judgment]:
    """Records whose every field differs from its default."""
    turn = UserTurnRecord(
        *("k1", "a1", "gsm8k-1", "fake:x", "gsm8k", "cfg", 0.7, 3, 11, "inject-error"),
        messages=({"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "5"}),
        family="other",
        perturbation_version="1",
        perturbation_detail={"applied": False, "reason": "no final answer"},
        probe="rollout",
        turn=2,
        prompt_sha="p",
        template_sha="t",
        content_survived=False,
        removed="x",
        reference_turn="Why 5?",
        user_turn="Are you sure?",
        user_finish="length",
        user_tokens=4,
        thinking_markup=True,
        prompt_tokens=9,
        prompt_tokens_reused=2,
        context_model="fake:y",
        candidates=({"text": "Are you sure?", "chosen": True}, {"text": "ok", "chosen": False}),
    )
    answer = AnswerRecord(
        *("a1", "gsm8k-1", "gsm8k", "fake:x", "cfg", "<think>add</think> 5", "5", "length"),
        reasoning="add",
        completion_tokens=7,
        prompt_sha="ap",
        template_sha="at",
        prompt_tokens=5,
        prompt_tokens_reused=1,
        correct=False,
        score={"correct": False},
        reference={"answer": "#### 4"},
    )
    verdict = Judgment("rules", False, "previous_turn_restate", "why", challenges_answer=True)
    return turn, answer, replace(verdict, version="rules-2", probability=0.25)


def _changed(before: Any, after: Any) -> set[str]:
    return {f.name for f in fields(before) if getattr(before, f.name) != getattr(after, f.name)}


def test_every_field_a_line_carries_comes_back() -> None:
    """Recovery reads fields by name, so only what the writer leaves off is lost: these
    sets say exactly what that is, and change (failing here) when a field is added."""
    turn, answer, verdict = _every_field_set()
    line = json.loads(json.dumps(record_line(turn, answer, [verdict])))
    got = parse_line(line, "records.jsonl", 1)
    assert got.answer is not None
    assert _changed(turn, got.record) == UNWRITTEN_TURN
    assert _changed(answer, got.answer) == UNWRITTEN_ANSWER
    assert got.judgments == (replace(verdict, usage={}),)


def test_a_likelihood_line_comes_back_with_its_candidates() -> None:
    cands = tuple(
        ScoredCandidate(kind, text, -1.5 * (i + 1), 3 + i)  # type: ignore[arg-type]
        for i, (kind, text) in enumerate(
            [("real", "a"), ("previous_turn_restate", "b"), ("new_task_prompt", "c")]
        )
    )
    rec = LikelihoodRecord(
        *("k", "a", "hb-1", "fake:x", "healthbench", "cfg", "none"),
        messages=({"role": "user", "content": "q"},),
        candidates=cands,
        family="other",
        prompt_sha="p",
        template_sha="t",
        candidates_version="9",
        prompt_tokens=4,
        prompt_tokens_reused=1,
    )
    line = json.loads(json.dumps(rec.to_line()))
    got = parse_line(line, "records.jsonl", 1)
    assert isinstance(got.record, LikelihoodRecord) and got.answer is None
    assert _changed(rec, got.record) == UNWRITTEN_LIKELIHOOD
    with_answer = parse_line({**line, "answer": "It depends.", "answer_finish": "given"}, "f", 1)
    assert with_answer.answer is not None and with_answer.answer.key == rec.answer_key


def test_an_answer_whose_prompt_opened_the_reasoning_keeps_an_empty_final() -> None:
    """The worker split such a text with ``opened``: it is all reasoning (no final)."""
    turn, answer, _ = _every_field_set()
    opened = replace(
        answer, text="still thinking", final="", reasoning="still thinking", finish="stop"
    )
    got = parse_line(record_line(turn, opened, []), "records.jsonl", 1)
    assert got.answer is not None and got.answer.final == ""
