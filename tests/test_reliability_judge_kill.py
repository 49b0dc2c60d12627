"""Paid judge calls survive a kill: a run is killed with SIGKILL while one batch of
judge calls is half answered (the fault server answers some at once and holds the rest
open), and the resume re-sends none of the answered calls.

Each answered verdict must be in the store, and in the verdict cache, before the next
is awaited; the kill lands only once the store shows every answered call, so the test
does not depend on timing (on code that stores a batch only when it is complete, the
store never shows them and the wait below runs out).
Run: ``.venv/bin/python -m pytest tests/test_reliability_judge_kill.py -q``
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fault_server import FaultServer
from reliability_helpers import cli
from userturn.cli import main

FAST, HELD = 5, 3
"""Turns whose judge call is answered at once, and turns whose call hangs until resumed."""


def _count(db: Path, table: str) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def _wait(what: str, ok: Callable[[], bool], proc: subprocess.Popen[str], deadline: float) -> None:
    """Poll ``ok()`` until true; the deadline is a hang guard, not a speed check."""
    while not ok():
        assert proc.poll() is None, f"the run ended early: {proc.communicate()}"
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.05)


def test_sigkill_mid_batch_resends_no_answered_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "items.jsonl"
    rows = [("ok", f"f{i}") for i in range(FAST)] + [("hold,ok", f"h{i}") for i in range(HELD)]
    data.write_text(
        "".join(
            json.dumps({"id": i, "messages": [{"role": "user", "content": f"{i}? [[fault:{s}]]"}]})
            + "\n"
            for s, i in rows
        )
    )
    out, cache = tmp_path / "run", tmp_path / "cache.sqlite"
    with FaultServer(lifetime=600.0) as srv:
        judge = (
            f"openai:fault-model?base_url={srv.base_url}&timeout=600&max_retries=0"
            f"&concurrency={FAST + HELD}"
        )
        args = ["run", "--model", "fake:k", "--dataset", f"jsonl:{data}", "--temperatures", "0"]
        args += ["--judge", judge, "--out", str(out)]
        proc = cli(*args, env={"USERTURN_JUDGE_CACHE": str(cache)})
        deadline = time.monotonic() + 240
        _wait("every call reach the server", lambda: len(srv.hits) >= FAST + HELD, proc, deadline)
        n = len(srv.answered)  # final now: the others are held open
        assert FAST <= n < FAST + HELD
        stored = lambda: _count(out / "store.sqlite", "judgments") == n  # noqa: E731
        _wait("the answered calls stored", stored, proc, deadline)
        cached = lambda: _count(cache, "judge_cache") == n  # noqa: E731
        _wait("the answered calls cached", cached, proc, deadline)
        assert proc.poll() is None, "the run ended before the kill"
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        answered, n_hits = set(srv.answered), len(srv.hits)
        # resume without the cache: the store alone must know what was answered
        monkeypatch.setenv("USERTURN_JUDGE_CACHE", "off")
        assert main(args) == 0
        resent = [h for h in srv.hits[n_hits:] if h.key in answered]
        assert resent == [], f"{len(resent)} of {n} answered calls sent again"
        assert len(srv.hits) - n_hits == FAST + HELD - n  # only the calls never answered
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == FAST + HELD
    assert all(r["judgments"][0]["status"] == "ok" for r in records)
