"""Progress where researchers run long jobs (nohup, SLURM, CI: stderr is not a terminal)
and Ctrl-C: plain ``progress`` lines with counts, rate and ETA, read from the stderr of a
real short run; one line on interrupt, exit code 130.

Run: ``.venv/bin/python -m pytest tests/test_progress.py -q``
"""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from userturn.cli.progress import INTERVAL_ENV, LogProgress, duration, interval_from_env
from userturn.errors import UserError

SMALL_RUN = [
    "run",
    "--model",
    "smollm2-135m",
    "--temperatures",
    "0",
    "--max-answer-tokens",
    "8",
    "--max-user-tokens",
    "8",
    "--judge",
    "rules",
]


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_lines_carry_counts_rate_and_eta() -> None:
    clock, buf = Clock(), io.StringIO()
    log = LogProgress(buf, interval=10, clock=clock)
    log.started = clock()
    log.stage("answers m", 4)
    log.tick()
    clock.t += 4
    log.advance("answers m")
    log.tick()
    clock.t += 2
    log.advance("answers m", 3)
    lines = buf.getvalue().splitlines()
    assert lines == [
        "progress 0s: answers m 0/4 (0%), waiting",
        "progress 4s: answers m 1/4 (25%), 0.25/s, eta 12s",
        "progress 6s: answers m 4/4 (100%) done in 6s",
    ]
    log.tick()  # nothing active: nothing written
    assert len(buf.getvalue().splitlines()) == 3


def test_an_empty_stage_is_not_shown() -> None:
    """A likelihood run has no judge: no "judging 0/0" line (its log once said so)."""
    clock, buf = Clock(), io.StringIO()
    log = LogProgress(buf, interval=10, clock=clock)
    log.stage("judging", 0)
    log.advance("judging", 0)
    log.tick()
    assert buf.getvalue() == ""


def test_a_stuck_stage_says_so_instead_of_an_eta() -> None:
    """Four steps in 4 s, then nothing for a minute: the line says how long nothing has
    moved, never "eta 4s" for as long as the call hangs."""
    clock, buf = Clock(), io.StringIO()
    log = LogProgress(buf, interval=10, clock=clock)
    log.started = clock()
    log.stage("user turns m", 8)
    for _ in range(4):
        clock.t += 1
        log.advance("user turns m")
    log.tick()
    clock.t += 60
    log.tick()
    first, stuck = buf.getvalue().splitlines()
    assert first.endswith("user turns m 4/8 (50%), 1/s, eta 4s")
    assert stuck.endswith("user turns m 4/8 (50%), no step for 1m00s") and "eta" not in stuck


def test_rich_bars_skip_empty_stages_and_show_a_stall() -> None:
    """The terminal bars: no bar for an empty stage; a stuck one shows "no step for"."""
    from rich.console import Console
    from rich.progress import Progress as Bars

    from userturn.cli.progress import RichProgress, eta_text

    clock = Clock()
    with Bars(console=Console(file=io.StringIO()), auto_refresh=False) as bars:
        rich = RichProgress(bars, clock=clock)
        rich.stage("judging", 0)
        rich.stage("answers m", 10)
        for _ in range(3):
            clock.t += 1
            rich.advance("answers m")
        rich.advance("judging")
        assert [t.description for t in bars.tasks] == ["answers m"]
        task = bars.tasks[0]
        assert eta_text(task, clock.t + 60) == "no step for 1m00s"
        assert eta_text(task, clock.t + 1).startswith("eta")


def test_durations_read_short() -> None:
    assert [duration(s) for s in (4.4, 65, 7325)] == ["4s", "1m05s", "2h02m"]


@pytest.mark.parametrize("raw", ["0", "-1", "abc", "inf", "nan"])
def test_interval_env_is_checked(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(INTERVAL_ENV, raw)
    with pytest.raises(UserError, match=INTERVAL_ENV):
        interval_from_env()


def _env(interval: str) -> dict[str, str]:
    return {**os.environ, INTERVAL_ENV: interval, "COLUMNS": "80", "PYTHONUNBUFFERED": "1"}


def test_non_tty_run_logs_progress(tmp_path: Path) -> None:
    """A real short run with stderr captured (a pipe, not a terminal)."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "userturn", *SMALL_RUN, "--limit", "2", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env("0.2"), timeout=600)
    assert proc.returncode == 0, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.startswith("progress ")]
    for stage in ("answers smollm2-135m 2/2", "user turns smollm2-135m 2/2", "judging 2/2"):
        assert any(stage in x and "done in" in x for x in lines), proc.stderr
    beats = [x for x in lines if "done in" not in x and not x.startswith("progress 0s: run: ")]
    assert beats, "no heartbeat line while the model loaded and generated"
    # A beat lists every stage still running, "; " between them; judging can
    # beat too while the judge loads, so each stage is checked on its own.
    stage = r"((answers|user turns) smollm2-135m|judging) \d+/2 \(\d+%\), (waiting|\S+/s)"
    for beat in beats:
        head, _, body = beat.partition(": ")
        assert re.fullmatch(r"progress \d+\S*", head), beat
        assert all(re.match(stage, part) for part in body.split("; ")), beat
    assert "Traceback" not in proc.stderr
    assert "genuine follow-up rate" in proc.stdout


def test_ctrl_c_says_what_was_kept(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "userturn", *SMALL_RUN, "--limit", "30", "--out", str(out)]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env("0.1")
    )
    assert proc.stderr is not None
    first = proc.stderr.readline()
    if first.startswith("progress 0s: run: "):  # the size line, before the run starts
        first = proc.stderr.readline()
    assert first.startswith("progress "), first  # the run has started its stages
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=300)
    assert proc.returncode == 130
    said = [x for x in rest.splitlines() if not x.startswith("progress ")]
    assert len(said) == 1 and said[0].startswith("interrupted: "), rest
    assert "run the same command to resume" in said[0] and "Traceback" not in rest
