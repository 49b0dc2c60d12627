"""Shared parts of the tests/test_reliability_*.py modules (not a test module): the CLI
as a real subprocess, a small JSONL dataset, and a check that a run directory's outputs
agree with its store line for line."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import userturn

JUDGE_REPLY = '{"genuine_followup": true, "label": "plausible_followup", "rationale": "fine"}'
"""One judge verdict. The fake backend formats its script texts (``{seed}``), so the
script holds it with doubled braces; the race tests count judgments, whatever they say."""


SRC = str(Path(userturn.__file__).resolve().parents[1])
"""Where the userturn under test lives: the subprocesses import the same one, whatever
the working directory (the tests run in a temporary one) and the installed copy."""


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``python -m userturn ARGS`` with its output captured."""
    path = os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.Popen(
        [sys.executable, "-m", "userturn", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": path, "USERTURN_JUDGE_CACHE": "off", **(env or {})},
    )


def write_items(path: Path, n: int, tag: str = "", pad: int = 0) -> Path:
    """``n`` JSONL conversations (``q0``, ``q1``...); ``tag`` goes into every prompt."""
    rows = [
        {"id": f"q{i}", "messages": [{"role": "user", "content": f"What is {i}+{i}? {tag}"}]}
        for i in range(n)
    ]
    for row in rows:
        row["messages"][0]["content"] += " " + ("word " * (pad // 5 + 1))[:pad]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def judge_script(tmp: Path) -> str:
    """An in-process LLM judge on the fake backend: every call answers one verdict."""
    script = tmp / "judge_script.json"
    reply = JUDGE_REPLY.replace("{", "{{").replace("}", "}}")
    script.write_text(json.dumps({"assistant": [reply]}), encoding="utf-8")
    return f"llm:fake:judge?script={script}"


def store_state(run: Path) -> tuple[set[str], dict[str, set[str]]]:
    """User-turn keys, and the judges that judged each, straight from the SQLite file."""
    con = sqlite3.connect(f"file:{run / 'store.sqlite'}?mode=ro", uri=True)
    try:
        keys = {r[0] for r in con.execute("SELECT key FROM user_turns")}
        judged: dict[str, set[str]] = {}
        for key, judge in con.execute("SELECT user_turn_key, judge FROM judgments"):
            judged.setdefault(key, set()).add(judge)
        return keys, judged
    finally:
        con.close()


def assert_outputs_match_store(run: Path) -> None:
    """records.jsonl: every line valid JSON, no id twice, exactly the store's user turns,
    each with exactly the store's judges; summary.json readable; no temporary file left."""
    lines = (run / "records.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids)), "duplicate ids in records.jsonl"
    keys, judged = store_state(run)
    assert set(ids) == keys
    for r in records:
        assert {j["judge"] for j in r["judgments"]} == judged.get(r["id"], set()), r["id"]
    json.loads((run / "summary.json").read_text(encoding="utf-8"))
    assert not [p.name for p in run.iterdir() if p.name.endswith(".tmp")]


def one_line_or_ok(code: int, err: str) -> None:
    """A writer either finished, or was refused in one line because another one held
    the directory; never a traceback."""
    assert "Traceback" not in err, err
    if code != 0:
        lines = [x for x in err.strip().splitlines() if not x.startswith("progress ")]
        assert code == 2 and len(lines) == 1, (code, err)
        assert "is writing this run directory" in lines[0], err
