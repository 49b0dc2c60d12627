"""Unit tests of the driver on the ``fake:`` backend: config fingerprints, datasets in
keys, resume, the run directory's guard rails.

Run: ``.venv/bin/python -m pytest tests/run/test_driver.py -q`` (seconds). Every test
works in ``tmp_path``; the real-model equivalents are in tests/test_pipeline.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from userturn.cli import main
from userturn.config import build_config
from userturn.errors import UserError
from userturn.run.driver import run
from userturn.rundir.store import Store

BASE: dict[str, Any] = {
    "models": ["fake:d"],
    "datasets": ["gsm8k"],
    "limit": 4,
    "temperatures": [0.0],
    "judges": ["rules"],
    "max_answer_tokens": 96,
    "max_user_tokens": 48,
}


def _cells(out: Path) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = json.loads((out / "summary.json").read_text())["cells"]
    return cells


def test_a_rerun_with_other_settings_is_refused_and_pools_nothing(tmp_path: Path) -> None:
    """Issue I.1: a rerun into a copy with --seed 1 used to pool two experiments (n=8 on
    4 items). It is refused, naming what differs, and --keep-configs makes two cells."""
    out = tmp_path / "a"
    run(build_config(BASE), out)
    copy = tmp_path / "b"
    shutil.copytree(out, copy)
    before = Store(copy / "store.sqlite").count_user_turns()
    for change in ({"seed": 1}, {"max_user_tokens": 40}):
        with pytest.raises(UserError, match=f"{next(iter(change))} "):
            run(build_config({**BASE, **change}), copy)
    assert Store(copy / "store.sqlite").count_user_turns() == before
    res = run(build_config({**BASE, "seed": 1, "keep_configs": True}), copy)
    cells = _cells(copy)
    assert len(cells) == 2 and {c["n"] for c in cells} == {4}
    assert {c["config"] for c in cells} == {res.config_id, _cells(out)[0]["config"]}
    manifest = (copy / "manifest.yaml").read_text()
    assert all(c["config"] in manifest for c in cells)  # the manifest lists every config


def test_two_datasets_with_the_same_rows_get_their_own_cells(tmp_path: Path) -> None:
    """Issue I.2: a jsonl copy of gsm8k items used to reuse gsm8k's rows and get no cell."""
    from userturn.datasets import load_dataset

    items = load_dataset("gsm8k").load_first(3)
    copy = tmp_path / "copy.jsonl"
    copy.write_text(
        "".join(json.dumps({"id": it.id, "messages": list(it.messages)}) + "\n" for it in items)
    )
    res = run(
        build_config({**BASE, "datasets": ["gsm8k", f"jsonl:{copy}"], "limit": 3}),
        tmp_path / "r",
    )
    assert {c.dataset for c in res.cells} == {"gsm8k", "jsonl:copy.jsonl"}
    assert all(c.n_total == 3 for c in res.cells)
    assert res.stats.generated == 6 and res.stats.reused == 0


def test_rerun_makes_no_call_and_a_killed_store_resumes(tmp_path: Path) -> None:
    out = tmp_path / "r"
    cfg = build_config({**BASE, "temperatures": [0.0, 1.0], "samples": 2})
    first = run(cfg, out)
    assert first.stats.generated == 4 * 3 and first.stats.model_calls == 4 + 12
    again = run(cfg, out)
    assert again.stats.model_calls == 0 and again.stats.reused == 12
    assert again.stats.judged == 0  # the judge's version is current: nothing redone


def test_a_failed_run_leaves_no_directory_behind(tmp_path: Path) -> None:
    out = tmp_path / "new" / "run"
    with pytest.raises(UserError):
        run(build_config({**BASE, "chat_template": str(tmp_path / "missing.jinja")}), out)
    assert not (tmp_path / "new").exists()


def test_out_that_is_a_file_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    for out in (f, f / "sub"):
        with pytest.raises(UserError, match="file"):
            run(build_config(BASE), out)
    assert f.read_text() == "x"


def test_a_dead_judge_server_stops_the_run_before_generation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = ["--model", "fake:j", "--limit", "2", "--temperatures", "0", "--out"]
    dead = "openai:m?base_url=http://127.0.0.1:9/v1&max_retries=0&timeout=1"
    code = main(["run", *flags, str(tmp_path / "r"), "--judge", dead])
    err = capsys.readouterr().err
    said = [x for x in err.splitlines() if not x.startswith("progress ")]  # not the size line
    assert code == 2 and len(said) == 1 and "127.0.0.1:9" in said[0]
    assert not (tmp_path / "r").exists()


def test_turns_stored_but_not_judged_are_judged_on_their_text(tmp_path: Path) -> None:
    """A run killed after its user turns were stored but before they were judged resumes
    by judging them. The judge must read the stored turn, not the resumed plan's
    placeholder: it once judged such turns as empty ("0 words"), all degenerate."""
    from userturn.judges import load_judge
    from userturn.run.judge_stage import judge_input

    out = tmp_path / "run"
    run(build_config({**BASE, "judges": []}), out)  # generated, never judged
    res = run(build_config({**BASE, "judges": ["offline"]}), out)
    assert res.stats.reused > 0 and res.stats.generated == 0
    with Store(out / "store.sqlite") as store:
        turns = list(store.user_turns())
        verdicts = store.judgments()
    assert turns and all(t.user_turn.strip() for t in turns)
    fresh = load_judge("offline").judge([judge_input(t) for t in turns])
    for turn, want in zip(turns, fresh, strict=True):
        got = verdicts[turn.key][0]
        assert (got.genuine, got.label, got.rationale) == (want.genuine, want.label, want.rationale)


def test_challenge_table_names_the_config_of_each_row(tmp_path: Path) -> None:
    """Two configs kept side by side (--keep-configs) give two challenge rows per cell;
    without a config column they read as one experiment printed twice."""
    from userturn.analysis import tables as T
    from userturn.analysis.views import analyze

    out = tmp_path / "r"
    grid = {**BASE, "perturbations": ["none", "truncate:0.5"], "judges": ["offline"]}
    first = run(build_config(grid), out)
    second = run(build_config({**grid, "seed": 1, "keep_configs": True}), out)
    store = Store(out / "store.sqlite")
    try:
        table = T.challenge_table(analyze(store), "offline")
    finally:
        store.close()
    assert "config" in table.columns
    configs = [row[table.columns.index("config")] for row in table.rows]
    assert sorted(configs) == sorted([first.config_id, second.config_id])
