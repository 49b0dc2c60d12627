"""SIGTERM stops a run the way Ctrl-C does: what is stored stays, records.jsonl and
summary.json are written to cover it, one line says how to resume, and the same command
then resumes. A real subprocess; the judge is the fault server answering slowly, so the
signal lands mid-run without any timing in the assertions.
Run: ``.venv/bin/python -m pytest tests/test_reliability_signals.py -q``
"""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from fault_server import FaultServer
from reliability_helpers import cli, write_items
from userturn.cli import main


def _judged(db: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return int(con.execute("SELECT count(*) FROM judgments").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return 0


@pytest.mark.parametrize("command", ["run", "judge"])
def test_sigterm_keeps_everything_and_says_how_to_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    data = write_items(tmp_path / "items.jsonl", 12)
    out = tmp_path / "run"
    monkeypatch.setenv("USERTURN_JUDGE_CACHE", "off")
    with FaultServer(latency=0.3) as srv:
        judge = f"openai:fault-model?base_url={srv.base_url}&concurrency=1&max_retries=0"
        gen = ["run", "--model", "fake:t", "--dataset", f"jsonl:{data}", "--temperatures", "0"]
        args = [*gen, "--judge", judge, "--out", str(out)]
        if command == "judge":  # a run judged offline, then an LLM judge over it
            assert main([*gen, "--judge", "rules", "--out", str(out)]) == 0
            args = ["judge", "--run", str(out), "--judge", judge]
        before = _judged(out / "store.sqlite")
        proc = cli(*args)
        deadline = time.monotonic() + 240
        while _judged(out / "store.sqlite") < before + 2:  # the hang guard, not a speed check
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 128 + signal.SIGTERM, err
        assert "Traceback" not in err
        lines = [x for x in err.splitlines() if not x.startswith("progress ")]
        assert len(lines) == 1, err
        (line,) = lines
        assert line.startswith("interrupted: ") and "run the same command to resume" in line
        assert "records.jsonl and summary.json cover them" in line
        stored = _judged(out / "store.sqlite")
        records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
        assert len(records) == 12
        assert sum(len(r["judgments"]) for r in records) == stored  # outputs cover the store
        assert stored < before + 12, "the signal landed after the run had finished"
        assert main(args) == 0
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert sum(len(r["judgments"]) for r in records) == before + 12
