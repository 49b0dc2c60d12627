"""The run store owns its schema: version 2, migration of version-1 stores, refusal of a
damaged file, and recovery from records.jsonl.

Run: ``.venv/bin/python -m pytest tests/run/test_store.py -q`` (about a second).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from userturn.cli import main
from userturn.config import build_config
from userturn.errors import UserError
from userturn.run.driver import run
from userturn.rundir.store import LEGACY_CONFIG, SCHEMA_VERSION, Store, open_run

V1_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE answers (key TEXT PRIMARY KEY, item_id TEXT NOT NULL, model TEXT NOT NULL,
  dataset TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE user_turns (key TEXT PRIMARY KEY, answer_key TEXT NOT NULL, item_id TEXT NOT NULL,
  model TEXT NOT NULL, dataset TEXT NOT NULL, temperature REAL, sample INTEGER NOT NULL,
  seed INTEGER, perturbation TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE judgments (user_turn_key TEXT NOT NULL, judge TEXT NOT NULL, data TEXT NOT NULL,
  PRIMARY KEY (user_turn_key, judge));
CREATE TABLE judge_cache (key TEXT PRIMARY KEY, data TEXT NOT NULL);
"""
CFG = {"models": ["fake:s"], "limit": 2, "temperatures": [0.0], "judges": ["rules"]}


def _v1_store(path: Path) -> None:
    """A store as userturn 0.1 wrote it (schema written out here, not taken from code)."""
    con = sqlite3.connect(path)
    con.executescript(V1_SCHEMA)
    con.execute(
        "INSERT INTO answers VALUES ('a1', 'i1', 'm', 'gsm8k', ?)",
        (json.dumps({"text": "42", "final": "42", "finish": "stop", "correct": True}),),
    )
    con.execute(
        "INSERT INTO user_turns VALUES ('u1', 'a1', 'i1', 'm', 'gsm8k', 0.0, 0, 1, 'none', ?)",
        (json.dumps({"messages": [{"role": "user", "content": "q"}], "user_turn": "Why?"}),),
    )
    con.execute(
        "INSERT INTO judgments VALUES ('u1', 'rules', ?)",
        (
            json.dumps(
                {
                    "judge": "rules",
                    "genuine_followup": True,
                    "label": "plausible_followup",
                    "rationale": "",
                    "status": "ok",
                    "version": "rules-1",
                }
            ),
        ),
    )
    con.commit()
    con.close()


def test_a_version_1_store_is_migrated_and_never_pooled_with_new_rows(tmp_path: Path) -> None:
    _v1_store(tmp_path / "store.sqlite")
    with Store(tmp_path / "store.sqlite") as store:
        assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
        (turn,) = store.user_turns()
        assert turn.config == LEGACY_CONFIG and turn.user_turn == "Why?"
        (answer,) = store.answers()
        assert answer.correct is True and answer.config == LEGACY_CONFIG
        assert LEGACY_CONFIG in store.configs()
    with pytest.raises(UserError, match="other settings"):
        run(build_config(CFG), tmp_path)  # a new run into it would pool: refused


def _tables(path: Path) -> set[str]:
    con = sqlite3.connect(path)
    try:
        return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    finally:
        con.close()


def test_a_store_with_the_old_judge_cache_table_still_opens_and_reads(tmp_path: Path) -> None:
    """Stores once had a ``judge_cache`` table that nothing wrote; new stores have none,
    and one that has it (left as it was) opens, resumes and reads like any other."""
    out = tmp_path / "r"
    run(build_config(CFG), out)
    db = out / "store.sqlite"
    assert "judge_cache" not in _tables(db)
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE judge_cache (key TEXT PRIMARY KEY, data TEXT NOT NULL)")
    con.execute("INSERT INTO judge_cache VALUES ('k', '{}')")
    con.commit()
    con.close()
    with Store(db) as store:
        assert len(list(store.user_turns())) == 2 and store.judgment_states("rules")
    again = run(build_config(CFG), out)
    assert again.stats.model_calls == 0 and again.stats.judged == 0
    assert "judge_cache" in _tables(db)


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    with Store(tmp_path / "store.sqlite") as store:
        store.conn.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    with pytest.raises(UserError, match="newer than this userturn"):
        Store(tmp_path / "store.sqlite")


@pytest.mark.parametrize("damage", ["empty", "header", "middle"])
def test_a_damaged_store_is_one_line_and_recover_rebuilds_it(
    tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r"
    run(build_config(CFG), out)
    db = out / "store.sqlite"
    with Store(db) as store:
        store.checkpoint()
    data = bytearray(db.read_bytes())
    if damage == "empty":
        data = bytearray()
    elif damage == "header":
        data[:100] = bytes(100)
    else:
        data[len(data) // 2 :] = bytes(len(data) - len(data) // 2)
    db.write_bytes(bytes(data))
    records_before = (out / "records.jsonl").read_text()
    for cmd in (["report", "--run", str(out)], ["judge", "--run", str(out), "--judge", "rules"]):
        assert main(cmd) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "userturn recover" in err
    assert (out / "records.jsonl").read_text() == records_before  # nothing lost
    assert main(["recover", "--run", str(out)]) == 0
    again = run(build_config(CFG), out)
    assert again.stats.model_calls == 0 and again.stats.judged == 0
    assert list(out.glob("store.sqlite.broken-*"))  # the damaged file is kept aside


def test_open_run_names_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="run directory not found"):
        open_run(tmp_path / "nope")
    (tmp_path / "f").write_text("x")
    with pytest.raises(UserError, match="not a directory"):
        open_run(tmp_path / "f")
    with pytest.raises(UserError, match=r"no store\.sqlite"):
        open_run(tmp_path)
