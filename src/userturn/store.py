"""The run store: one SQLite database per run directory (WAL, one writer).

Every record's primary key is a content hash of what produced it (model and revision,
template SHA, prompt SHA, stage, sampling params, sample index, seed, perturbation, judge
and rubric version). That one choice gives resume for free: re-running looks each key up
and makes no model call for what exists, and a run killed with SIGKILL between two
commits loses at most the generation in flight, never a committed row, and never
duplicates one (``INSERT OR IGNORE`` on the key).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS answers (
  key TEXT PRIMARY KEY, item_id TEXT NOT NULL, model TEXT NOT NULL, dataset TEXT NOT NULL,
  data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS user_turns (
  key TEXT PRIMARY KEY, answer_key TEXT NOT NULL, item_id TEXT NOT NULL,
  model TEXT NOT NULL, dataset TEXT NOT NULL, temperature REAL, sample INTEGER NOT NULL,
  seed INTEGER, perturbation TEXT NOT NULL, data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS judgments (
  user_turn_key TEXT NOT NULL, judge TEXT NOT NULL, data TEXT NOT NULL,
  PRIMARY KEY (user_turn_key, judge)
);
CREATE TABLE IF NOT EXISTS judge_cache (key TEXT PRIMARY KEY, data TEXT NOT NULL);
"""


def content_key(*parts: Any) -> str:
    """A stable hash of JSON-serialisable parts (dict keys sorted)."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class UserTurnRow:
    key: str
    answer_key: str
    item_id: str
    model: str
    dataset: str
    temperature: float | None
    sample: int
    seed: int | None
    perturbation: str
    data: dict[str, Any]


class Store:
    """SQLite-backed record store. Writes are small autocommitted transactions."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.conn = sqlite3.connect(str(path), isolation_level=None, timeout=30.0)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.executescript(SCHEMA)

    def close(self) -> None:
        self.conn.close()

    # meta -----------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta_default(self, key: str, value: str) -> str:
        """Set ``key`` once; later runs get the first value (e.g. the frozen date)."""
        self.conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", (key, value))
        got = self.get_meta(key)
        assert got is not None
        return got

    # answers --------------------------------------------------------------------------
    def get_answer(self, key: str) -> dict[str, Any] | None:
        row = self.conn.execute("SELECT data FROM answers WHERE key=?", (key,)).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def put_answer(
        self, key: str, item_id: str, model: str, dataset: str, data: dict[str, Any]
    ) -> None:
        self.conn.execute(
            "INSERT OR IGNORE INTO answers(key, item_id, model, dataset, data) "
            "VALUES (?, ?, ?, ?, ?)",
            (key, item_id, model, dataset, _dump(data)),
        )

    def answers(self) -> Iterator[tuple[str, dict[str, Any]]]:
        for key, data in self.conn.execute("SELECT key, data FROM answers ORDER BY rowid"):
            yield key, json.loads(data)

    # user turns -----------------------------------------------------------------------
    def user_turn_keys(self) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT key FROM user_turns")}

    def put_user_turn(self, row: UserTurnRow) -> None:
        self.conn.execute(
            "INSERT OR IGNORE INTO user_turns(key, answer_key, item_id, model, dataset, "
            "temperature, sample, seed, perturbation, data) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                row.key,
                row.answer_key,
                row.item_id,
                row.model,
                row.dataset,
                row.temperature,
                row.sample,
                row.seed,
                row.perturbation,
                _dump(row.data),
            ),
        )

    def user_turns(self) -> Iterator[UserTurnRow]:
        cur = self.conn.execute(
            "SELECT key, answer_key, item_id, model, dataset, temperature, sample, seed, "
            "perturbation, data FROM user_turns ORDER BY rowid"
        )
        for r in cur:
            yield UserTurnRow(
                r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], json.loads(r[9])
            )

    # judgments ------------------------------------------------------------------------
    def judged_keys(self, judge: str) -> set[str]:
        cur = self.conn.execute("SELECT user_turn_key FROM judgments WHERE judge=?", (judge,))
        return {r[0] for r in cur}

    def put_judgment(self, user_turn_key: str, judge: str, data: dict[str, Any]) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO judgments(user_turn_key, judge, data) VALUES (?, ?, ?)",
            (user_turn_key, judge, _dump(data)),
        )

    def judgments(self) -> dict[str, list[dict[str, Any]]]:
        """All judgments, grouped by user-turn key, in judge-insertion order."""
        out: dict[str, list[dict[str, Any]]] = {}
        cur = self.conn.execute("SELECT user_turn_key, data FROM judgments ORDER BY rowid")
        for key, data in cur:
            out.setdefault(key, []).append(json.loads(data))
        return out

    def judges(self) -> list[str]:
        cur = self.conn.execute("SELECT DISTINCT judge FROM judgments ORDER BY judge")
        return [r[0] for r in cur]

    # judge cache ----------------------------------------------------------------------
    def cache_get(self, key: str) -> dict[str, Any] | None:
        row = self.conn.execute("SELECT data FROM judge_cache WHERE key=?", (key,)).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def cache_put(self, key: str, data: dict[str, Any]) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO judge_cache(key, data) VALUES (?, ?)", (key, _dump(data))
        )


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
