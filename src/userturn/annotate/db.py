"""The annotation database: ``annotations.sqlite`` inside the packet folder.

Every submission is committed before the server answers (WAL, ``synchronous=FULL``), so
closing the tab or killing the server loses nothing. Rows are keyed by (annotator,
example id): several annotators can label the same packet at once, and a second submit
of the same example replaces the first (the annotator changed their mind) while
``revisions`` counts how often that happened.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from userturn.errors import UserError

DB_NAME = "annotations.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS annotations (
  annotator TEXT NOT NULL, example_id TEXT NOT NULL, genuine INTEGER NOT NULL,
  label TEXT NOT NULL, note TEXT NOT NULL DEFAULT '', created_at REAL NOT NULL,
  updated_at REAL NOT NULL, revisions INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (annotator, example_id)
);
"""


@dataclass(frozen=True)
class Annotation:
    annotator: str
    example_id: str
    genuine: bool
    label: str
    note: str
    revisions: int = 0


class AnnotationDB:
    """One connection shared by the server's worker threads, serialised by a lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(
            str(path), isolation_level=None, timeout=30.0, check_same_thread=False
        )
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.executescript(SCHEMA)
            self._conn.execute("SELECT COUNT(*) FROM annotations").fetchone()
        except sqlite3.DatabaseError as exc:  # not a database, or damaged pages
            self._conn.close()
            raise UserError(
                f"damaged annotation database ({exc}); move it aside to start a new one, "
                "its labels cannot be read",
                file=str(path),
            ) from exc

    @classmethod
    def in_packet(cls, packet: Path) -> AnnotationDB:
        return cls(packet / DB_NAME)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def save(
        self, annotator: str, example_id: str, genuine: bool, label: str, note: str
    ) -> Annotation:
        """Insert or replace one annotation; committed when this returns."""
        now = time.time()
        with self._lock:
            self._conn.execute(
                "INSERT INTO annotations(annotator, example_id, genuine, label, note, "
                "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(annotator, example_id) DO UPDATE SET genuine=excluded.genuine, "
                "label=excluded.label, note=excluded.note, updated_at=excluded.updated_at, "
                "revisions=revisions+1",
                (annotator, example_id, int(genuine), label, note, now, now),
            )
            row = self._conn.execute(
                "SELECT revisions FROM annotations WHERE annotator=? AND example_id=?",
                (annotator, example_id),
            ).fetchone()
        return Annotation(annotator, example_id, genuine, label, note, int(row[0]))

    def for_annotator(self, annotator: str) -> list[Annotation]:
        return self._select("WHERE annotator=?", (annotator,))

    def all(self) -> list[Annotation]:
        return self._select("", ())

    def annotators(self) -> list[str]:
        with self._lock:
            cur = self._conn.execute("SELECT DISTINCT annotator FROM annotations ORDER BY 1")
            return [str(r[0]) for r in cur]

    def _select(self, where: str, args: tuple[str, ...]) -> list[Annotation]:
        sql = (
            "SELECT annotator, example_id, genuine, label, note, revisions FROM "
            f"annotations {where} ORDER BY annotator, created_at, example_id"
        )
        with self._lock:
            rows = self._conn.execute(sql, args).fetchall()
        return [Annotation(r[0], r[1], bool(r[2]), r[3], r[4], int(r[5])) for r in rows]
