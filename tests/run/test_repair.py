"""``userturn recover``: a store rebuilt from records.jsonl gives back the same run.

Runs are made with the real CLI on the ``fake:`` backend (generate probe with
``inject-error`` applied and not applied and the real next human turn judged, likelihood
probe on given and generated answers, best-of-N rollouts; the rules judge and an LLM
judge on the fault-injecting OpenAI-compatible server, priced, so its verdicts carry
usage and cost). The store is then deleted or zeroed and recovered: the outputs it
writes must equal the originals byte for byte, and every column of every row of every
table must equal the original store's (real SQLite, read with plain SQL). A records.jsonl
of the previous format (version 2, without the fields added since) still recovers, with
those fields at their defaults.

Run: ``.venv/bin/python -m pytest tests/run/test_repair.py -q`` (under 15 seconds).
"""

from __future__ import annotations

import copy
import json
import shutil
import sqlite3
from collections import Counter
from collections.abc import Iterator
from dataclasses import MISSING, fields, replace
from pathlib import Path
from typing import Any

import pytest

from fault_server import FaultServer
from userturn.cli import main
from userturn.errors import UserError
from userturn.run.repair import parse_line, recover
from userturn.rundir.lines import likelihood_line, record_line
from userturn.rundir.records import (
    AnswerRecord,
    Counterfactual,
    LikelihoodRecord,
    ScoredCandidate,
    UserTurnRecord,
)
from userturn.types import Judgment

GENERATE = [
    *("run", "--model", "fake:x", "--dataset", "gsm8k", "--dataset", "healthbench"),
    *("--limit", "2", "--temperatures", "0", "--perturb", "inject-error", "--judge", "rules"),
]
"""gsm8k has gold answers (inject-error applies); healthbench is held out (it can't)."""
LIKELIHOOD = [
    *("likelihood", "--model", "fake:x", "--dataset", "healthbench", "--dataset", "mtbench"),
    *("--limit", "2"),
]
"""healthbench's answers are given; MT-Bench's are generated, and no user turn uses them."""
ROLLOUT = [
    *("rollout", "--model", "fake:x", "--dataset", "gsm8k", "--limit", "2", "--turns", "2"),
    *("--best-of", "2", "--user-temperature", "1.0", "--judge", "rules"),
    *("--select-judge", "offline"),
]
"""Best-of turns are chosen by one judge (offline) and scored by another (rules)."""
FAST = "backoff=0.01&timeout=5&max_retries=2&cache=off"
SCRIPT = {
    "assistant": ["<think>6 * 7 = 42</think> The answer is 42."],
    "user": ["Why is it 42? (seed {seed})", "<think>ask</think> Is 42 right? (seed {seed})"],
}
"""Answers with a reasoning part and some user turns with thinking markup, so recover's
split of the answer (``final``) and those flags meet non-default values."""

KEYS = {
    "meta": ("key",),
    "configs": ("id",),
    "answers": ("key",),
    "user_turns": ("key",),
    "judgments": ("user_turn_key", "judge"),
    "likelihoods": ("key",),
    "items": ("dataset", "item_id"),
}
"""Every table of the store schema and its primary key: rows are matched on it, then
every column compared (``data`` decoded, so a difference names its field)."""
ORDER_KEPT = {"meta", "configs", "user_turns", "likelihoods"}
"""Tables whose row order recover keeps, because records.jsonl and the store's readers
follow it. Not kept, by nature: SQLite's implicit ``rowid`` of ``answers`` (lines follow
user turns, then likelihood contexts; an answer's own insertion order is recorded nowhere
and every reader keys answers by ``key``) and of ``judgments`` across turns (readers
group verdicts by turn; the order within a turn is kept and checked). No table has an
autoincrement id or a timestamp column."""
GAPS: dict[str, tuple[type[Any], set[str]]] = {
    "answers": (
        AnswerRecord,
        {
            "completion_tokens",
            "prompt_sha",
            "template_sha",
            "prompt_tokens",
            "prompt_tokens_reused",
            "score",
        },
    ),
    "user_turns": (
        UserTurnRecord,
        {"perturbation_version", "user_tokens", "prompt_tokens", "prompt_tokens_reused"}
        | {"context_model"},
    ),
    "likelihoods": (
        LikelihoodRecord,
        {"prompt_tokens", "prompt_tokens_reused", "counterfactuals", "excluded"},
    ),
    "judgments": (Judgment, {"usage"}),
}
"""Stored fields that records.jsonl version 2 lacked (table -> record class, fields); in
version 2 likelihood lines also lacked their answer."""
NOT_MADE_BY_FAKE = {
    ("answers", "prompt_tokens_reused"),
    ("user_turns", "prompt_tokens_reused"),
    ("likelihoods", "prompt_tokens"),
    ("likelihoods", "prompt_tokens_reused"),
    ("likelihoods", "excluded"),
}
"""Gap fields the fake backend leaves at 0 (it reuses no prompt tokens and counts none
when scoring), and ``excluded``, which these items never are (no reference copies a
context turn); test_every_field_a_line_carries_comes_back and
test_a_likelihood_line_comes_back_with_its_candidates_and_answer set them."""
V2_TURN_KEYS = {
    *("id", "item_id", "model", "family", "dataset", "config", "probe", "turn"),
    *("temperature", "sample", "seed", "perturbation", "perturbation_detail", "messages"),
    *("answer_key", "answer_model", "answer", "answer_reasoning", "correct"),
    *("answer_finish", "answer_truncated", "user_turn", "user_finish", "thinking_markup"),
    *("content_survived", "removed", "prompt_sha", "template_sha", "reference_turn"),
    *("candidates", "answer_gold", "judgments"),
}
"""The keys of a user-turn line of records.jsonl version 2 (userturn before this change)."""
V2_LIKELIHOOD_KEYS = {
    *("id", "item_id", "model", "family", "dataset", "config", "probe", "perturbation"),
    *("messages", "answer_key", "candidates", "candidates_version", "prefers_real"),
    *("margin", "prompt_sha", "template_sha"),
}
V2_JUDGMENT_KEYS = {"judge", "genuine_followup", "label", "rationale", "status"}
V2_JUDGMENT_KEYS |= {"probability", "challenges_answer", "version"}


def _invoke(out: Path, commands: list[list[str]]) -> list[int]:
    """Run each command into ``out``; return each invocation's model calls."""
    calls = []
    for cmd in commands:
        assert main([*cmd, "--out", str(out), "--keep-configs"]) == 0
        stats = json.loads((out / "run_stats.json").read_text())
        calls.append(stats["model_calls"])
    return calls


@pytest.fixture(scope="module")
def llm_judge() -> Iterator[str]:
    """An LLM judge whose verdicts report calls, tokens and cost, as a hosted one's do."""
    with FaultServer(lifetime=600) as srv:
        yield f"openai:fault-model?base_url={srv.base_url}&{FAST}&price_in=1&price_out=2"


@pytest.fixture(scope="module")
def probes(llm_judge: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The commands of each run set: the generate probe alone, and every probe (scripted
    answers, perturbation ``none`` with ``--judge-reference`` for the human rows, and the
    LLM judge) into one directory."""
    script = tmp_path_factory.mktemp("script") / "fake.json"
    script.write_text(json.dumps(SCRIPT))
    model = ["--model", f"fake:x?script={script}"]
    generate = [*GENERATE, *model, "--perturb", "none", "--judge-reference"]
    return {
        "generate": [GENERATE],
        "all": [[*generate, "--judge", llm_judge], [*LIKELIHOOD, *model], [*ROLLOUT, *model]],
    }


@pytest.fixture(scope="module")
def runs(probes: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One run directory per probe set, made once for the module."""
    base = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(base)
        for name, commands in probes.items():
            _invoke(base / name, commands)
    return {name: base / name for name in probes}


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write_lines(path: Path, lines: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(ln) + "\n" for ln in lines))


def _damage(store: Path, how: str) -> None:
    if how == "deleted":
        store.unlink()
    else:
        store.write_bytes(b"")


@pytest.mark.parametrize("damage", ["deleted", "zeroed"])
@pytest.mark.parametrize("name", ["generate", "all"])
def test_recover_gives_back_the_same_records_and_summary(
    runs: dict[str, Path], probes: dict[str, Any], tmp_path: Path, name: str, damage: str
) -> None:
    out = tmp_path / "run"
    shutil.copytree(runs[name], out)
    records = (out / "records.jsonl").read_bytes()
    summary = json.loads((out / "summary.json").read_text())
    lines = _lines(out / "records.jsonl")
    applied = [d["applied"] for ln in lines if (d := ln.get("perturbation_detail"))]
    assert True in applied and False in applied  # the run holds both kinds of turn
    rules = [c for c in summary["cells"] if c["judge"] == "rules"]  # one judge's cells
    assert sum(c["n_not_applied"] for c in rules) == applied.count(False)
    _damage(out / "store.sqlite", damage)

    res = recover(out)

    assert (out / "records.jsonl").read_bytes() == records
    assert json.loads((out / "summary.json").read_text()) == summary
    assert res.user_turns + res.likelihoods == len(lines)
    assert res.likelihoods == sum(ln["probe"] == "likelihood" for ln in lines)
    assert _invoke(out, probes[name]) == [0] * len(probes[name])
    assert (out / "records.jsonl").read_bytes() == records


def test_the_all_probes_run_holds_what_recover_must_keep(runs: dict[str, Path]) -> None:
    """The fixture's run has likelihood lines and best-of-N candidates (else the test
    above would prove nothing about them)."""
    lines = _lines(runs["all"] / "records.jsonl")
    assert any(ln["probe"] == "likelihood" for ln in lines)
    assert any(ln["probe"] == "rollout" and ln["candidates"] for ln in lines)


# every column of every table -----------------------------------------------------------
def _tables(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Every table's rows in rowid order, as column -> value (``data`` decoded)."""
    conn = sqlite3.connect(path)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        out = {}
        for name in names:
            cur = conn.execute(f"SELECT * FROM {name} ORDER BY rowid")
            cols = [d[0] for d in cur.description]
            rows = [dict(zip(cols, row, strict=True)) for row in cur]
            for row in rows:
                if "data" in row:
                    row["data"] = json.loads(row["data"])
            out[name] = rows
        return out
    finally:
        conn.close()


def _keyed(table: str, rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    return {tuple(r[c] for c in KEYS[table]): r for r in rows}


def _judges_per_turn(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in rows:
        out.setdefault(r["user_turn_key"], []).append(r["judge"])
    return out


def _row_differences(want: dict[str, Any], have: dict[str, Any]) -> set[str]:
    """The columns (and ``data`` fields) in which two rows differ; a field missing from
    one side differs from any value, null included."""
    cols = {c for c in want | have if c != "data" and want.get(c) != have.get(c)}
    wd, hd = want.get("data", {}), have.get("data", {})
    gone = object()
    return cols | {f"data.{f}" for f in wd | hd if wd.get(f, gone) != hd.get(f, gone)}


def _store_differences(want: dict[str, list[dict[str, Any]]], got: Path) -> list[str]:
    """What the store at ``got`` lacks or has otherwise than ``want``, per table: lost or
    added rows, each differing column or data field with its row count, row order."""
    have = _tables(got)
    sides = {"original": set(want), "recovered": set(have)}
    out = [f"{side} tables off KEYS: {sorted(t ^ set(KEYS))}" for side, t in sides.items()]
    out = [line for line, t in zip(out, sides.values(), strict=True) if t != set(KEYS)]
    for table in KEYS:
        w, h = _keyed(table, want.get(table, [])), _keyed(table, have.get(table, []))
        if w.keys() != h.keys():
            out.append(
                f"{table}: {len(w.keys() - h.keys())} rows lost, {len(h.keys() - w.keys())} added"
            )
        counts: Counter[str] = Counter()
        for k in w.keys() & h.keys():
            counts.update(_row_differences(w[k], h[k]))
        out += [f"{table}.{col} differs in {n} rows" for col, n in sorted(counts.items())]
        if table in ORDER_KEPT and [k for k in w if k in h] != [k for k in h if k in w]:
            out.append(f"{table}: row order")
    if _judges_per_turn(have.get("judgments", [])) != _judges_per_turn(want["judgments"]):
        out.append("judgments: order within a turn")
    return out


def _default(cls: type[Any], name: str) -> Any:
    """A field's default as the store's JSON holds it (a tuple reads back as a list)."""
    f = next(f for f in fields(cls) if f.name == name)
    value = f.default if f.default_factory is MISSING else f.default_factory()
    return list(value) if isinstance(value, tuple) else value


def _only_likelihood_answers(tables: dict[str, list[dict[str, Any]]]) -> set[str]:
    """Answers no user turn follows (only likelihood contexts do)."""
    used = {r["answer_key"] for r in tables["user_turns"]}
    return {r["data"]["answer_key"] for r in tables["likelihoods"]} - used


def test_recover_restores_every_column_of_every_table(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    shutil.copytree(runs["all"], out)
    before = _tables(out / "store.sqlite")
    for table, (cls, names) in GAPS.items():  # the run has something to lose in each gap
        for name in names - {n for t, n in NOT_MADE_BY_FAKE if t == table}:
            assert any(r["data"][name] != _default(cls, name) for r in before[table]), name
    assert _only_likelihood_answers(before)
    (out / "store.sqlite").unlink()

    recover(out)

    assert _store_differences(before, out / "store.sqlite") == []


def _as_v2(line: dict[str, Any]) -> dict[str, Any]:
    """The line as records.jsonl version 2 wrote it: only the keys it had."""
    keys = V2_LIKELIHOOD_KEYS if line["probe"] == "likelihood" else V2_TURN_KEYS
    old = {k: v for k, v in line.items() if k in keys}
    if "judgments" in old:
        old["judgments"] = [
            {k: v for k, v in j.items() if k in V2_JUDGMENT_KEYS} for j in old["judgments"]
        ]
    return old


def _without_gaps(tables: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The store a version-2 records.jsonl gives back: the gap fields at their defaults,
    no answer that only likelihood contexts followed, and no item content hashes (the
    next resume records them again)."""
    lost = _only_likelihood_answers(tables)
    out = copy.deepcopy(tables)
    out["answers"] = [r for r in out["answers"] if r["key"] not in lost]
    out["items"] = []
    for table, (cls, names) in GAPS.items():
        for row in out[table]:
            row["data"].update({n: _default(cls, n) for n in names})
    return out


def test_a_records_file_of_the_previous_format_still_recovers(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """A run made before the gap fields were written recovers as it always did."""
    out = tmp_path / "run"
    shutil.copytree(runs["all"], out)
    before = _tables(out / "store.sqlite")
    lines = [_as_v2(ln) for ln in _lines(out / "records.jsonl")]
    kinds = {ln["probe"] == "likelihood": set(ln) for ln in lines}
    assert kinds == {False: V2_TURN_KEYS, True: V2_LIKELIHOOD_KEYS}  # today's lines hold them
    _write_lines(out / "records.jsonl", lines)
    (out / "store.sqlite").unlink()

    res = recover(out)

    assert res.user_turns + res.likelihoods == len(lines)
    assert _store_differences(_without_gaps(before), out / "store.sqlite") == []


# stores that must not be replaced, lines that must not be read ---------------------------
def test_a_store_with_only_likelihood_records_is_kept_without_force(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        _invoke(out, [LIKELIHOOD])
    with pytest.raises(UserError, match="--force"):
        recover(out)
    records = (out / "records.jsonl").read_bytes()
    assert recover(out, force=True).likelihoods == len(records.splitlines())
    assert (out / "records.jsonl").read_bytes() == records


def test_a_bad_line_names_its_line_and_field_and_touches_nothing(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    shutil.copytree(runs["all"], out)
    lines = _lines(out / "records.jsonl")
    lines[1]["perturbation_detail"] = "applied"
    _write_lines(out / "records.jsonl", lines)
    (out / "store.sqlite").write_bytes(b"")
    with pytest.raises(UserError) as err:
        recover(out)
    assert err.value.line == 2 and err.value.field == "perturbation_detail"
    assert (out / "store.sqlite").read_bytes() == b""
    assert sorted(p.name for p in out.glob("store.sqlite*")) == ["store.sqlite"]


def test_a_perturbation_detail_is_checked_key_by_key(runs: dict[str, Path]) -> None:
    """The detail the store's SQL reads (``applied``) is typed: a value that is no
    boolean, or a detail without it, is refused by field; keys of another version stay."""
    line = next(ln for ln in _lines(runs["all"] / "records.jsonl") if ln["perturbation_detail"])
    detail = line["perturbation_detail"]
    for bad in (
        {**detail, "applied": "maybe"},
        {k: v for k, v in detail.items() if k != "applied"},
    ):
        with pytest.raises(UserError) as err:
            parse_line({**line, "perturbation_detail": bad}, "records.jsonl", 4)
        assert err.value.line == 4 and err.value.field == "perturbation_detail.applied"
    kept = parse_line({**line, "perturbation_detail": {**detail, "later": 1}}, "records.jsonl", 4)
    assert isinstance(kept.record, UserTurnRecord)
    assert kept.record.perturbation_detail == {**detail, "later": 1}


def test_a_bad_answer_field_is_named_by_its_line_key(runs: dict[str, Path]) -> None:
    line = next(ln for ln in _lines(runs["all"] / "records.jsonl") if ln["answer"])
    with pytest.raises(UserError) as err:
        parse_line({**line, "answer_completion_tokens": "many"}, "records.jsonl", 3)
    assert err.value.line == 3 and err.value.field == "answer_completion_tokens"


# one line, every field ------------------------------------------------------------------
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
    usage = {"calls": 2, "prompt_tokens": 900, "completion_tokens": 40, "cost_usd": 0.00098}
    return turn, answer, replace(verdict, version="rules-2", probability=0.25, usage=usage)


def _changed(before: Any, after: Any) -> set[str]:
    return {f.name for f in fields(before) if getattr(before, f.name) != getattr(after, f.name)}


def test_every_field_a_line_carries_comes_back() -> None:
    """Recovery reads fields by name, so only what the writer leaves off would be lost:
    a field added to a record and not to its line fails here."""
    turn, answer, verdict = _every_field_set()
    line = json.loads(json.dumps(record_line(turn, answer, [verdict])))
    got = parse_line(line, "records.jsonl", 1)
    assert got.answer is not None
    assert _changed(turn, got.record) == set()
    assert _changed(answer, got.answer) == set()
    assert got.judgments == (verdict,)


def test_a_likelihood_line_comes_back_with_its_candidates_and_answer() -> None:
    cands = tuple(
        ScoredCandidate(kind, text, -1.5 * (i + 1), 3 + i)  # type: ignore[arg-type]
        for i, (kind, text) in enumerate(
            [("real", "a"), ("previous_turn_restate", "b"), ("new_task_prompt", "c")]
        )
    )
    rec = LikelihoodRecord(
        *("k", "a1", "gsm8k-1", "fake:x", "gsm8k", "cfg", "none"),
        messages=({"role": "user", "content": "q"},),
        candidates=cands,
        family="other",
        prompt_sha="p",
        template_sha="t",
        candidates_version="9",
        prompt_tokens=4,
        prompt_tokens_reused=1,
    )
    _, answer, _ = _every_field_set()
    got = parse_line(json.loads(json.dumps(likelihood_line(rec, answer))), "records.jsonl", 1)
    assert isinstance(got.record, LikelihoodRecord) and got.answer is not None
    assert _changed(rec, got.record) == set()
    assert _changed(answer, got.answer) == set()
    bare = parse_line(json.loads(json.dumps(likelihood_line(rec, None))), "records.jsonl", 1)
    assert bare.record == rec and bare.answer is None
    v2 = replace(
        rec,
        candidates=(*cands, replace(cands[0], condition="cf0", logprob=-9.0)),
        counterfactuals=(Counterfactual("truncate:0.5", "half an answer"),),
    )
    back = parse_line(json.loads(json.dumps(likelihood_line(v2, None))), "records.jsonl", 1)
    assert back.record == v2 and back.record.pmi("real") == -1.5 + 9.0
    left_out = replace(rec, candidates=(), excluded="the reference turn equals a turn")
    line = json.loads(json.dumps(likelihood_line(left_out, None)))
    assert line["prefers_real"] is None and line["pmi_real"] is None
    assert parse_line(line, "records.jsonl", 1).record == left_out


def test_an_answer_whose_prompt_opened_the_reasoning_keeps_an_empty_final() -> None:
    """The worker split such a text with ``opened``: it is all reasoning (no final)."""
    turn, answer, _ = _every_field_set()
    opened = replace(
        answer, text="still thinking", final="", reasoning="still thinking", finish="stop"
    )
    got = parse_line(record_line(turn, opened, []), "records.jsonl", 1)
    assert got.answer is not None and got.answer.final == ""
