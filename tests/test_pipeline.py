"""End-to-end probe on the real embedded model: contracts, resume, and kill -9.

Run: ``.venv/bin/python -m pytest tests/test_pipeline.py -q``
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from contract import CELL_KEYS, RECORD_KEYS, STATS_KEYS
from userturn.cli import main

FLAGS = [
    "--limit",
    "2",
    "--temperatures",
    "0,1.0",
    "--samples",
    "2",
    "--judge",
    "rules",
    "--max-answer-tokens",
    "48",
    "--max-user-tokens",
    "24",
]


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run") / "r"
    assert main(["run", *FLAGS, "--out", str(out)]) == 0
    return out


def test_run_directory_contract(run_dir: Path) -> None:
    cells = json.loads((run_dir / "summary.json").read_text())["cells"]
    assert {c["temperature"] for c in cells} == {0.0, 1.0}
    assert all(CELL_KEYS <= set(c) for c in cells)
    t0, t1 = sorted(cells, key=lambda c: c["temperature"])
    assert (t0["n_total"], t1["n_total"]) == (2, 4)  # one sample at T=0, k=2 at T=1
    assert t0["ci_method"] == "wilson" and t1["ci_method"] == "cluster-bootstrap+wilson-floor"
    assert t0["accuracy"] is not None and t0["n"] + t0["unparseable"] + t0["errors"] == 2
    recs = records(run_dir)
    assert len(recs) == 6 and all(RECORD_KEYS <= set(r) for r in recs)
    assert all(r["perturbation"] == "none" and r["judgments"][0]["status"] == "ok" for r in recs)
    stats = json.loads((run_dir / "run_stats.json").read_text())
    assert STATS_KEYS <= set(stats) and stats["generated"] == 6 and stats["model_calls"] == 8
    man = yaml.safe_load((run_dir / "manifest.yaml").read_text())
    assert man["frozen_date"] and man["models"][0]["template_sha"] == recs[0]["template_sha"]
    assert man["config"]["limit"] == 2


def test_one_answer_per_item_shared_by_all_samples(run_dir: Path) -> None:
    by_item: dict[str, set[str]] = {}
    for r in records(run_dir):
        by_item.setdefault(r["item_id"], set()).add(r["answer"])
        assert r["messages"][-1] == {"role": "assistant", "content": r["answer"].strip()}
    assert all(len(v) == 1 for v in by_item.values()) and len(by_item) == 2


def test_rerun_makes_zero_model_calls(run_dir: Path) -> None:
    before = (run_dir / "records.jsonl").read_text()
    assert main(["run", *FLAGS, "--out", str(run_dir)]) == 0
    stats = json.loads((run_dir / "run_stats.json").read_text())
    assert stats["model_calls"] == 0 and stats["generated"] == 0 and stats["reused"] == 6
    assert stats["judge_calls"] == 0 and stats["judged"] == 0
    assert (run_dir / "records.jsonl").read_text() == before


def test_answers_at_token_limit_are_counted(tmp_path: Path) -> None:
    out = tmp_path / "trunc"
    assert (
        main(
            [
                "run",
                "--limit",
                "2",
                "--temperatures",
                "0",
                "--judge",
                "rules",
                "--max-answer-tokens",
                "4",
                "--max-user-tokens",
                "8",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    cell = json.loads((out / "summary.json").read_text())["cells"][0]
    assert cell["answers_truncated"] == 2
    assert all(r["answer_finish"] == "length" for r in records(out))


def _count(db: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return int(con.execute("SELECT count(*) FROM user_turns").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def test_sigkill_resumes_without_loss_or_duplicates(tmp_path: Path) -> None:
    out = tmp_path / "killed"
    items, samples = 3, 2
    total = items * (1 + samples)  # T=0 takes one sample, T=1.0 takes `samples`
    args = [
        "--limit",
        str(items),
        "--temperatures",
        "0,1.0",
        "--samples",
        str(samples),
        "--judge",
        "rules",
        "--max-answer-tokens",
        "32",
        "--max-user-tokens",
        "24",
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "userturn", "run", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    db = out / "store.sqlite"
    deadline = time.monotonic() + 300
    while _count(db) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    con = sqlite3.connect(db)
    kept = dict(con.execute("SELECT key, data FROM user_turns").fetchall())
    con.close()
    assert 0 < len(kept) < total, "kill landed mid-run"
    assert main(["run", *args]) == 0
    stats = json.loads((out / "run_stats.json").read_text())
    assert stats["reused"] == len(kept) and stats["generated"] == total - len(kept)
    con = sqlite3.connect(db)
    rows = dict(con.execute("SELECT key, data FROM user_turns").fetchall())
    con.close()
    assert len(rows) == total and all(rows[k] == v for k, v in kept.items())
    assert len({r["id"] for r in records(out)}) == total
