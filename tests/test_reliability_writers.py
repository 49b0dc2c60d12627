"""One writer per run directory: ``judge --run D`` racing ``run --out D``, and parallel
resumes, leave outputs that match the store line for line, and a refused writer says
so in one line (no traceback, no invalid line, no duplicate id, no judgment missing).

Real subprocesses on the ``fake:`` backend (the race is between processes, and the lock
is the kernel's); a round takes about two process starts.
Run: ``.venv/bin/python -m pytest tests/test_reliability_writers.py -q``
"""

from __future__ import annotations

from pathlib import Path

from reliability_helpers import (
    assert_outputs_match_store,
    cli,
    judge_script,
    one_line_or_ok,
    store_state,
    write_items,
)
from userturn.cli import main
from userturn.rundir.lock import LOCK_NAME, run_lock

ROUNDS = 20


def _run_args(data: Path, out: Path, limit: int) -> list[str]:
    return [
        "run",
        "--model",
        "fake:w",
        "--dataset",
        f"jsonl:{data}",
        "--limit",
        str(limit),
        "--temperatures",
        "0,1",
        "--samples",
        "2",
        "--judge",
        "rules",
        "--out",
        str(out),
    ]


def test_judge_and_run_racing_on_one_directory(tmp_path: Path) -> None:
    data = write_items(tmp_path / "items.jsonl", 2 + 2 * ROUNDS)
    out = tmp_path / "run"
    judge = judge_script(tmp_path)
    assert main(_run_args(data, out, 2)) == 0
    refused = 0
    for r in range(ROUNDS):
        procs = [
            cli("judge", "--run", str(out), "--judge", judge),
            cli(*_run_args(data, out, 4 + 2 * r)),
        ]
        for p in procs:
            _, err = p.communicate(timeout=300)
            one_line_or_ok(p.returncode, err)
            refused += p.returncode != 0
        assert_outputs_match_store(out)
    # whoever was refused, a last pass of each leaves everything judged by both
    assert main(_run_args(data, out, 2 + 2 * ROUNDS)) == 0
    assert main(["judge", "--run", str(out), "--judge", judge]) == 0
    assert_outputs_match_store(out)
    keys, judged = store_state(out)
    assert len(keys) == (2 + 2 * ROUNDS) * 3 and all(len(judged[k]) == 2 for k in keys)


def test_parallel_resumes(tmp_path: Path) -> None:
    data = write_items(tmp_path / "items.jsonl", 12)
    out = tmp_path / "run"
    assert main(_run_args(data, out, 1)) == 0
    for r in range(5):
        procs = [cli(*_run_args(data, out, 2 + 2 * r)) for _ in range(3)]
        codes = []
        for p in procs:
            _, err = p.communicate(timeout=300)
            one_line_or_ok(p.returncode, err)
            codes.append(p.returncode)
        assert 0 in codes, "every resume was refused: none held the lock"
        assert_outputs_match_store(out)


def test_second_writer_is_refused_in_one_line_naming_the_holder(tmp_path: Path) -> None:
    data = write_items(tmp_path / "items.jsonl", 2)
    out = tmp_path / "run"
    assert main(_run_args(data, out, 2)) == 0
    before = (out / "records.jsonl").read_bytes()
    with run_lock(out, "run"):
        for args in (
            ["judge", "--run", str(out), "--judge", judge_script(tmp_path)],
            _run_args(data, out, 2),
            ["rescore", "--run", str(out)],
            ["recover", "--run", str(out), "--force"],
        ):
            p = cli(*args)
            _, err = p.communicate(timeout=300)
            assert p.returncode == 2 and "Traceback" not in err, err
            # the run's size line is a progress line; the refusal is the one error line
            (line,) = [x for x in err.strip().splitlines() if not x.startswith("progress ")]
            assert line.startswith(f"error: {out}: another userturn process (pid "), line
            assert "userturn run) is writing this run directory" in line
            assert "run this command again when it has finished" in line
    assert (out / "records.jsonl").read_bytes() == before
    assert (out / LOCK_NAME).is_file()  # left in place; the kernel lock is what counts
    assert main(["judge", "--run", str(out), "--judge", judge_script(tmp_path)]) == 0
