"""The LLM judge's verdict cache, keyed by (judge model, rubric version, content).

Why here and not in the run store: judges are also used without a run (``userturn judge
--in``, ``agree``'s inputs, the cascade benchmark), and the same (context, turn) often
recurs across runs (held-out sets, reruns with a new model revision that writes the same
turn). So the default cache is one small SQLite file in the user cache dir, shared by
every run. Anything with ``cache_get``/``cache_put`` can replace it.

Only ``ok`` verdicts are cached: an error or unparseable reply is retried next time.
``?cache=off`` on the judge spec, or ``USERTURN_JUDGE_CACHE=off``, disables it;
``USERTURN_JUDGE_CACHE=PATH`` moves it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, Protocol

from userturn import assets
from userturn.registry import FALSE


class JudgeCache(Protocol):
    def cache_get(self, key: str) -> dict[str, Any] | None: ...

    def cache_put(self, key: str, data: dict[str, Any]) -> None: ...


class DiskCache:
    """A ``judge_cache(key, data)`` table in its own SQLite file (WAL, shared by runs)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(
            str(path), isolation_level=None, timeout=30.0, check_same_thread=False
        )
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS judge_cache (key TEXT PRIMARY KEY, data TEXT NOT NULL)"
        )

    def cache_get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._conn.execute("SELECT data FROM judge_cache WHERE key=?", (key,)).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def cache_put(self, key: str, data: dict[str, Any]) -> None:
        blob = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO judge_cache(key, data) VALUES (?, ?)", (key, blob)
            )

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def open_cache(on: bool, given: JudgeCache | None = None) -> JudgeCache | None:
    """The cache a judge uses: none if switched off, ``given`` if passed, else the file."""
    env = os.environ.get("USERTURN_JUDGE_CACHE", "")
    if not on or env.lower() in FALSE:
        return None
    if given is not None:
        return given
    return DiskCache(Path(env) if env else assets.cache_dir() / "judge_cache.sqlite")
