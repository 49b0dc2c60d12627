"""The judge stage against the fault-injecting server: an outage fails the run, and
``judge --run --retry-failed`` re-judges only what did not come back ok.

Run: ``.venv/bin/python -m pytest tests/run/test_judge_stage.py -q`` (seconds).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fault_server import FaultServer
from userturn.cli import main
from userturn.rundir.store import Store


def _statuses(run: Path) -> list[str]:
    with Store(run / "store.sqlite") as store:
        return [j.status for js in store.judgments().values() for j in js]


def test_outage_exits_nonzero_then_retry_failed_rejudges_only_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("USERTURN_JUDGE_CACHE", "off")
    script = tmp_path / "script.json"
    # every judge request about this turn fails twice with HTTP 500, then succeeds
    script.write_text(json.dumps({"user": ["Is 42 right? [[fault:500,500,ok]]"]}))
    run = tmp_path / "run"
    with FaultServer() as srv:
        judge = f"openai:fault-model?base_url={srv.base_url}&max_retries=1&backoff=0"
        flags = ["--model", f"fake:f?script={script}", "--limit", "3", "--temperatures", "0"]
        code = main(["run", *flags, "--judge", judge, "--out", str(run)])
        err = capsys.readouterr().err
        assert code == 1 and "no verdict for 3 of 3" in err and "--retry-failed" in err
        assert _statuses(run) == ["error"] * 3
        judged_before = len(srv.hits)
        assert main(["judge", "--run", str(run), "--judge", judge]) == 0  # not retried
        assert "3 verdicts" in capsys.readouterr().out and len(srv.hits) == judged_before
        assert main(["judge", "--run", str(run), "--judge", judge, "--retry-failed"]) == 0
        assert _statuses(run) == ["ok"] * 3
        assert len(srv.hits) == judged_before + 3  # one more call per failed turn only
        assert main(["judge", "--run", str(run), "--judge", judge, "--retry-failed"]) == 0
        assert len(srv.hits) == judged_before + 3  # nothing left to retry
    cells = json.loads((run / "summary.json").read_text())["cells"]
    assert cells[0]["n"] == 3 and cells[0]["errors"] == 0
