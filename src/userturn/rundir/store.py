"""The run store: one SQLite database per run directory (WAL, one writer). All SQL lives
in this module.

Every record's primary key is a content hash of what produced it (model and revision,
template SHA, prompt SHA, stage, sampling params, sample index, seed, perturbation,
dataset and the run's config fingerprint; for judgments the judge and its version).
That one choice gives resume for free: re-running looks each key up and makes no model
call for what exists, and a run killed with SIGKILL between two commits loses at most
the generation in flight, never a committed row, and never duplicates one
(``INSERT OR IGNORE`` on the key).

The schema has a version (``meta.schema_version``). A version-1 store (userturn 0.1,
before config fingerprints) is migrated in place: its rows get the config ``legacy``,
so they stay readable and are never pooled with new rows. A file that is not a usable
store (zero bytes, a damaged header or page) is refused with one line that says how to
rebuild it from ``records.jsonl`` (``userturn recover``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from userturn.errors import UserError
from userturn.rundir.atomic import space_error
from userturn.rundir.lock import run_lock
from userturn.rundir.records import AnswerRecord, LikelihoodRecord, UserTurnRecord
from userturn.types import DETAIL_APPLIED, Judgment

STORE_NAME = "store.sqlite"
SCHEMA_VERSION = 2
LEGACY_CONFIG = "legacy"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS configs (id TEXT PRIMARY KEY, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS answers (
  key TEXT PRIMARY KEY, item_id TEXT NOT NULL, model TEXT NOT NULL, dataset TEXT NOT NULL,
  config TEXT NOT NULL, data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS user_turns (
  key TEXT PRIMARY KEY, answer_key TEXT NOT NULL, item_id TEXT NOT NULL,
  model TEXT NOT NULL, dataset TEXT NOT NULL, config TEXT NOT NULL, temperature REAL,
  sample INTEGER NOT NULL, seed INTEGER, perturbation TEXT NOT NULL,
  probe TEXT NOT NULL DEFAULT 'generate', turn INTEGER NOT NULL DEFAULT 1, data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS judgments (
  user_turn_key TEXT NOT NULL, judge TEXT NOT NULL, data TEXT NOT NULL,
  PRIMARY KEY (user_turn_key, judge)
);
CREATE TABLE IF NOT EXISTS items (
  dataset TEXT NOT NULL, item_id TEXT NOT NULL, sha TEXT NOT NULL, PRIMARY KEY (dataset, item_id)
);
CREATE TABLE IF NOT EXISTS likelihoods (
  key TEXT PRIMARY KEY, item_id TEXT NOT NULL, model TEXT NOT NULL, dataset TEXT NOT NULL,
  config TEXT NOT NULL, perturbation TEXT NOT NULL, data TEXT NOT NULL
);
"""
MIGRATE_1_TO_2 = f"""
ALTER TABLE answers ADD COLUMN config TEXT NOT NULL DEFAULT '{LEGACY_CONFIG}';
ALTER TABLE user_turns ADD COLUMN config TEXT NOT NULL DEFAULT '{LEGACY_CONFIG}';
ALTER TABLE user_turns ADD COLUMN probe TEXT NOT NULL DEFAULT 'generate';
ALTER TABLE user_turns ADD COLUMN turn INTEGER NOT NULL DEFAULT 1;
CREATE TABLE IF NOT EXISTS configs (id TEXT PRIMARY KEY, data TEXT NOT NULL);
INSERT OR IGNORE INTO configs(id, data) VALUES
  ('{LEGACY_CONFIG}', '{{"note": "made before config fingerprints (userturn 0.1)"}}');
"""
_LIKELIHOOD_COLS = ("key", "item_id", "model", "dataset", "config", "perturbation")
_ANSWER_COLS = AnswerRecord.COLUMNS
_TURN_COLS = UserTurnRecord.COLUMNS


class TurnFact(NamedTuple):
    """What aggregation needs of one user turn and its answer (no texts)."""

    key: str
    item_id: str
    model: str
    dataset: str
    config: str
    temperature: float | None
    sample: int
    perturbation: str
    probe: str
    turn: int
    family: str
    answer_key: str
    correct: bool | None
    answer_finish: str | None
    perturbed: bool = True
    """False when the perturbation could not apply (``inject-error`` without a gold or a
    final answer): the turn saw the unperturbed answer."""


class JudgmentFact(NamedTuple):
    user_turn_key: str
    judge: str
    status: str
    genuine: bool | None
    label: str | None
    challenges_answer: bool | None


def corrupt(path: Path, detail: str) -> UserError:
    """A store that can't be read; the way out depends on whether records.jsonl exists."""
    if (path.parent / "records.jsonl").is_file():
        hint = (
            "records.jsonl holds a complete copy: rebuild the store with "
            f"`userturn recover --run {path.parent}`"
        )
    else:
        hint = "there is no records.jsonl to rebuild it from: move it aside and run again"
    return UserError(f"not a usable run store ({detail}); {hint}", file=str(path))


def disk_full(exc: sqlite3.Error) -> bool:
    """SQLite's SQLITE_FULL: the disk (or the store's page limit) is full, the data isn't bad."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code == sqlite3.SQLITE_FULL or "database or disk is full" in str(exc)


def full_error(conn: sqlite3.Connection, path: Path, exc: sqlite3.Error) -> Exception:
    """The line for a full disk, after checking what it says: a store that passes SQLite's
    integrity check is called intact; one that doesn't is called what it is."""
    try:
        intact = [r[0] for r in conn.execute("PRAGMA quick_check")] == ["ok"]
    except sqlite3.Error:
        intact = False
    if not intact:
        return corrupt(path, f"{exc}, and it fails its integrity check")
    return space_error(path, "the store passed its integrity check and keeps every committed row")


class Store:
    """SQLite-backed record store. Writes are small autocommitted transactions."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._closers: list[Callable[[], object]] = []
        new = not path.exists()
        if not new and path.stat().st_size == 0:
            raise corrupt(path, "the file is empty")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(str(path), isolation_level=None, timeout=30.0)
            try:
                self.conn.execute("PRAGMA journal_mode=WAL")
                self.conn.execute("PRAGMA synchronous=NORMAL")
                self._prepare(new)
            except BaseException:
                self.conn.close()  # leave no -wal/-shm beside a store we refuse
                raise
        except OSError as exc:
            raise UserError(f"cannot create the store: {exc.strerror}", file=str(path)) from exc
        except sqlite3.OperationalError as exc:
            if disk_full(exc):
                raise _full_on_open(path, exc) from None
            if "locked" in str(exc) or "unable to open" in str(exc):
                raise UserError(f"cannot open the store: {exc}", file=str(path)) from exc
            raise corrupt(path, str(exc)) from exc
        except sqlite3.DatabaseError as exc:
            raise corrupt(path, str(exc)) from exc

    def _prepare(self, new: bool) -> None:
        tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master")}
        if not new and "user_turns" not in tables:
            raise corrupt(self.path, "it has no user_turns table")
        if not new and "configs" not in tables:
            self.conn.executescript(MIGRATE_1_TO_2)
        self.conn.executescript(SCHEMA)
        version = self.get_meta("schema_version")
        if version is not None and int(version) > SCHEMA_VERSION:
            raise UserError(
                f"store schema {version} is newer than this userturn's ({SCHEMA_VERSION}); "
                "upgrade userturn",
                file=str(self.path),
            )
        if version != str(SCHEMA_VERSION):  # a read-only command leaves the file as it was
            self.conn.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        try:
            return list(self.conn.execute(sql, params))
        except sqlite3.DatabaseError as exc:
            raise self._fault(exc) from exc

    def _write(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        try:
            self.conn.execute(sql, params)
        except sqlite3.DatabaseError as exc:
            raise self._fault(exc) from exc

    def _fault(self, exc: sqlite3.DatabaseError) -> Exception:
        if disk_full(exc):
            return full_error(self.conn, self.path, exc)
        return corrupt(self.path, str(exc))

    def close(self) -> None:
        self.conn.close()
        while self._closers:
            self._closers.pop()()

    def on_close(self, fn: Callable[[], object]) -> None:
        """Run ``fn`` when the store is closed (release the run's writer lock)."""
        self._closers.append(fn)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Many writes as one transaction: bulk loads (recover, benchmarks), not runs,
        which commit row by row so a kill loses at most the row in flight."""
        self._write("BEGIN")
        try:
            yield
        except BaseException:
            self._write("ROLLBACK")
            raise
        self._write("COMMIT")

    def checkpoint(self) -> None:
        """Fold the write-ahead log into the database file (before it is moved)."""
        self._write("PRAGMA wal_checkpoint(TRUNCATE)")

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # meta and configs -----------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self._rows("SELECT value FROM meta WHERE key=?", (key,))
        return None if not rows else str(rows[0][0])

    def set_meta_default(self, key: str, value: str) -> str:
        """Set ``key`` once; later runs get the first value (e.g. the frozen date)."""
        self._write("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", (key, value))
        got = self.get_meta(key)
        assert got is not None
        return got

    def put_config(self, config_id: str, data: dict[str, Any]) -> None:
        self._write(
            "INSERT OR IGNORE INTO configs(id, data) VALUES (?, ?)", (config_id, _dump(data))
        )

    def configs(self) -> dict[str, dict[str, Any]]:
        """Every config fingerprint with rows or registered in this store, oldest first."""
        rows = self._rows("SELECT id, data FROM configs ORDER BY rowid")
        return {cid: json.loads(data) for cid, data in rows}

    # dataset items --------------------------------------------------------------------
    def item_hashes(self, dataset: str) -> dict[str, str]:
        """item id -> content hash of every item of ``dataset`` this store has seen."""
        rows = self._rows("SELECT item_id, sha FROM items WHERE dataset=?", (dataset,))
        return {str(i): str(h) for i, h in rows}

    def all_item_hashes(self) -> dict[tuple[str, str], str]:
        """(dataset, item id) -> content hash, for records.jsonl (recover reads it back)."""
        rows = self._rows("SELECT dataset, item_id, sha FROM items ORDER BY rowid")
        return {(str(d), str(i)): str(h) for d, i, h in rows}

    def put_item_hash(self, dataset: str, item_id: str, sha: str) -> None:
        self._write(
            "INSERT OR IGNORE INTO items(dataset, item_id, sha) VALUES (?, ?, ?)",
            (dataset, item_id, sha),
        )

    def put_item_hashes(self, dataset: str, hashes: dict[str, str]) -> None:
        if not hashes:
            return
        with self.transaction():
            for item_id, sha in hashes.items():
                self.put_item_hash(dataset, item_id, sha)

    # answers --------------------------------------------------------------------------
    def put_answer(self, rec: AnswerRecord) -> None:
        self._write(
            "INSERT OR IGNORE INTO answers(key, item_id, model, dataset, config, data) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (rec.key, rec.item_id, rec.model, rec.dataset, rec.config, _dump(rec.to_row())),
        )

    def update_answer(self, rec: AnswerRecord) -> None:
        """Replace an answer's data (``rescore``); its key and columns stay."""
        self._write("UPDATE answers SET data=? WHERE key=?", (_dump(rec.to_row()), rec.key))

    def answers(self) -> Iterator[AnswerRecord]:
        sql = f"SELECT {', '.join(_ANSWER_COLS)}, data FROM answers ORDER BY rowid"
        for row in self._rows(sql):
            yield AnswerRecord.from_row(
                dict(zip(_ANSWER_COLS, row, strict=False)), json.loads(row[-1])
            )

    # user turns -----------------------------------------------------------------------
    def user_turn_keys(self) -> set[str]:
        return {r[0] for r in self._rows("SELECT key FROM user_turns")}

    def count_user_turns(self) -> int:
        return int(self._rows("SELECT COUNT(*) FROM user_turns")[0][0])

    def count_records(self) -> int:
        """User turns plus likelihood records: what records.jsonl holds a line for."""
        return self.count_user_turns() + int(self._rows("SELECT COUNT(*) FROM likelihoods")[0][0])

    def put_user_turn(self, rec: UserTurnRecord) -> None:
        cols = ", ".join(_TURN_COLS)
        values = tuple(getattr(rec, c) for c in _TURN_COLS)
        self._write(
            f"INSERT OR IGNORE INTO user_turns({cols}, data) VALUES ({', '.join('?' * 13)})",
            (*values, _dump(rec.to_row())),
        )

    def user_turns(self, probe: str | None = None) -> Iterator[UserTurnRecord]:
        where, params = ("WHERE probe=?", (probe,)) if probe else ("", ())
        sql = f"SELECT {', '.join(_TURN_COLS)}, data FROM user_turns {where} ORDER BY rowid"
        for row in self._rows(sql, params):
            cols = dict(zip(_TURN_COLS, row, strict=False))
            yield UserTurnRecord.from_row(cols, json.loads(row[-1]))

    # likelihood probe -----------------------------------------------------------------
    def put_likelihood(self, rec: LikelihoodRecord) -> None:
        values = tuple(getattr(rec, c) for c in _LIKELIHOOD_COLS)
        self._write(
            f"INSERT OR IGNORE INTO likelihoods({', '.join(_LIKELIHOOD_COLS)}, data) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (*values, _dump(rec.to_row())),
        )

    def likelihood_keys(self) -> set[str]:
        return {r[0] for r in self._rows("SELECT key FROM likelihoods")}

    def likelihoods(self) -> Iterator[LikelihoodRecord]:
        sql = f"SELECT {', '.join(_LIKELIHOOD_COLS)}, data FROM likelihoods ORDER BY rowid"
        for row in self._rows(sql):
            cols = dict(zip(_LIKELIHOOD_COLS, row, strict=False))
            yield LikelihoodRecord.from_row(cols, json.loads(row[-1]))

    # judgments ------------------------------------------------------------------------
    def put_judgment(self, user_turn_key: str, judgment: Judgment) -> None:
        self._write(
            "INSERT OR REPLACE INTO judgments(user_turn_key, judge, data) VALUES (?, ?, ?)",
            (user_turn_key, judgment.judge, _dump(judgment.to_row())),
        )

    def judgments(self) -> dict[str, list[Judgment]]:
        """All judgments, grouped by user-turn key, in judge-insertion order."""
        out: dict[str, list[Judgment]] = {}
        for key, data in self._rows("SELECT user_turn_key, data FROM judgments ORDER BY rowid"):
            out.setdefault(key, []).append(Judgment.from_row(json.loads(data)))
        return out

    def judges(self) -> list[str]:
        return [r[0] for r in self._rows("SELECT DISTINCT judge FROM judgments ORDER BY judge")]

    def judge_versions(self) -> dict[str, str]:
        """judge -> the version of most of its stored verdicts."""
        rows = self._rows(
            "SELECT judge, json_extract(data, '$.version') AS v, COUNT(*) AS n FROM judgments "
            "GROUP BY judge, v ORDER BY judge, n DESC, v"
        )
        out: dict[str, str] = {}
        for judge, version, _ in rows:
            out.setdefault(judge, str(version or ""))
        return out

    def judgment_states(self, judge: str) -> dict[str, tuple[str, str]]:
        """user-turn key -> (judge version, status) for one judge: what is current and ok."""
        rows = self._rows(
            "SELECT user_turn_key, json_extract(data, '$.version'), "
            "json_extract(data, '$.status') FROM judgments WHERE judge=?",
            (judge,),
        )
        return {k: (str(v), str(s)) for k, v, s in rows}

    # aggregation ----------------------------------------------------------------------
    def turn_facts(self, probe: str | None = None) -> Iterator[TurnFact]:
        """One fact per user turn (of one probe, if given), joined with its answer's
        correctness and finish; pulled with ``json_extract`` so 100k records aggregate
        without decoding every record."""
        where = "WHERE u.probe = ?" if probe else ""
        sql = f"""
        SELECT u.key, u.item_id, u.model, u.dataset, u.config, u.temperature, u.sample,
               u.perturbation, u.probe, u.turn, json_extract(u.data, '$.family'),
               u.answer_key, json_extract(a.data, '$.correct'), json_extract(a.data, '$.finish'),
               json_extract(u.data, '$.perturbation_detail.{DETAIL_APPLIED}')
        FROM user_turns u LEFT JOIN answers a ON a.key = u.answer_key {where} ORDER BY u.rowid
        """
        for r in self._rows(sql, (probe,) if probe else ()):
            yield TurnFact(
                key=r[0],
                item_id=r[1],
                model=r[2],
                dataset=r[3],
                config=r[4],
                temperature=r[5],
                sample=r[6],
                perturbation=r[7],
                probe=r[8],
                turn=r[9],
                family=str(r[10] or ""),
                answer_key=r[11],
                correct=None if r[12] is None else bool(r[12]),
                answer_finish=r[13],
                perturbed=r[14] is None or bool(r[14]),
            )

    def judgment_facts(self) -> Iterator[JudgmentFact]:
        sql = """
        SELECT user_turn_key, judge, json_extract(data, '$.status'),
               json_extract(data, '$.genuine_followup'), json_extract(data, '$.label'),
               json_extract(data, '$.challenges_answer')
        FROM judgments
        """
        for key, judge, status, genuine, label, challenge in self._rows(sql):
            yield JudgmentFact(
                key,
                judge,
                str(status),
                None if genuine is None else bool(genuine),
                label,
                None if challenge is None else bool(challenge),
            )


def _full_on_open(path: Path, exc: sqlite3.Error) -> Exception:
    """A full disk while a store was being opened or created: check it on a fresh connection."""
    conn = sqlite3.connect(str(path), timeout=30.0)
    try:
        return full_error(conn, path, exc)
    finally:
        conn.close()


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def open_run(run_dir: Path, writer: str | None = None) -> Store:
    """The store of an existing run directory, or a one-line error saying what is wrong.

    A command that writes the run names itself as ``writer``: it then holds the run's
    writer lock until the store is closed, and a second writer is refused in one line
    (``userturn.rundir.lock``)."""
    if not run_dir.exists():
        raise UserError("run directory not found", file=str(run_dir))
    if not run_dir.is_dir():
        raise UserError("not a directory (expected a run directory)", file=str(run_dir))
    path = run_dir / STORE_NAME
    if not path.is_file():
        hint = (
            "; rebuild it from records.jsonl with `userturn recover`"
            if (run_dir / "records.jsonl").is_file()
            else ""
        )
        raise UserError(f"not a run directory (no {STORE_NAME}){hint}", file=str(run_dir))
    store = Store(path)
    records = run_dir / "records.jsonl"
    try:
        empty = store.count_records() == 0
    except BaseException:
        store.close()
        raise
    if empty and records.is_file() and records.stat().st_size > 0:
        store.close()
        raise corrupt(path, "it holds no records but records.jsonl does")
    if writer is not None:
        hold(store, run_dir, writer)
    return store


def hold(store: Store, run_dir: Path, writer: str) -> None:
    """Take the run's writer lock for ``store`` until it is closed (or close it and
    refuse). Taken after the store opened: a command refused for a damaged store leaves
    the directory exactly as it was, without even a lock file."""
    lock = ExitStack()
    try:
        lock.enter_context(run_lock(run_dir, writer))
    except BaseException:
        store.close()
        raise
    store.on_close(lock.close)
