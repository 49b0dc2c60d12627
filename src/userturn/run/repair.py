"""Repairs of a run directory: ``rescore`` (re-apply the current scorers to stored
answers) and ``recover`` (rebuild a lost or damaged store from ``records.jsonl``).

Why rescore: accuracy is stored with each answer when it is generated, so a fixed
scorer (a better number extractor, a new verifier) would otherwise never reach old
runs. The gold data is stored with each answer for exactly this.

Why recover: ``records.jsonl`` is a complete copy of what a run produced (every user
turn with its context, answer, keys, token counts and verdicts with their usage; every
likelihood-probe context with its scored candidates and answer), so a store that was
deleted, zeroed or damaged can be rebuilt from it, field for field, and a rerun then
makes no model call for what the records hold. Lines written before a field was added
give that field its default. A damaged store is moved aside, never deleted.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import TypeAdapter, ValidationError

from userturn.chat import split_reasoning
from userturn.datasets import load_dataset
from userturn.datasets.base import read_jsonl
from userturn.errors import UserError
from userturn.run.outputs import write_outputs
from userturn.rundir.keys import content_key
from userturn.rundir.lines import line_record
from userturn.rundir.lock import run_lock
from userturn.rundir.records import ANSWER_LINE_KEYS, AnswerRecord, LikelihoodRecord, UserTurnRecord
from userturn.rundir.store import LEGACY_CONFIG, STORE_NAME, Store, open_run
from userturn.types import Item, Judgment


@dataclass
class RescoreResult:
    rescored: int = 0
    changed: list[tuple[str, str, bool | None, bool | None]] = field(default_factory=list)
    """(dataset, item id, correct before, correct after) for every answer that changed."""
    skipped: Counter[str] = field(default_factory=Counter)
    """Why answers were not rescored (not scored, no gold stored, scorer unavailable)."""


def rescore(run_dir: Path) -> RescoreResult:
    """Score every stored answer again with the current scorers; rewrite the outputs."""
    result = RescoreResult()
    with open_run(run_dir, writer="rescore") as store:
        scorers: dict[str, Any] = {}
        for ans in store.answers():
            new = _rescored(ans, scorers, result.skipped)
            if new is None:
                continue
            result.rescored += 1
            if new.correct != ans.correct or new.score != ans.score:
                store.update_answer(new)
                if new.correct != ans.correct:
                    result.changed.append((ans.dataset, ans.item_id, ans.correct, new.correct))
        write_outputs(run_dir, store)
    return result


def _rescored(
    ans: AnswerRecord, scorers: dict[str, Any], skipped: Counter[str]
) -> AnswerRecord | None:
    if ans.finish == "given":
        skipped["given answers (held-out sets) are not scored"] += 1
        return None
    if ans.reference is None:
        skipped["no gold data stored (not scored, or made before rescore existed)"] += 1
        return None
    if ans.dataset not in scorers:
        try:
            scorers[ans.dataset] = load_dataset(ans.dataset)
        except UserError as exc:
            scorers[ans.dataset] = exc
    ds = scorers[ans.dataset]
    if isinstance(ds, UserError):
        skipped[f"{ans.dataset}: {ds}"] += 1
        return None
    if ans.finish == "length_in_reasoning":
        return ans  # no final answer: incorrect whatever the scorer says
    score = ds.score(Item(ans.item_id, ans.dataset, (), reference=ans.reference), ans.final)
    return replace(ans, score=score, correct=None if score is None else score.get("correct"))


def describe_changes(result: RescoreResult) -> list[str]:
    """Human-readable lines for ``userturn rescore``."""
    by_ds = Counter(ds for ds, *_ in result.changed)
    lines = [f"{result.rescored} answers rescored; {len(result.changed)} changed correctness"]
    lines += [f"  {ds}: {n} changed" for ds, n in sorted(by_ds.items())]
    lines += [
        f"  {ds} {item}: {json.dumps(a)} -> {json.dumps(b)}"
        for ds, item, a, b in result.changed[:20]
    ]
    lines += [f"  skipped {n}: {why}" for why, n in result.skipped.items()]
    return lines


# recover ----------------------------------------------------------------------------------
@dataclass
class RecoverResult:
    user_turns: int
    answers: int
    judgments: int
    moved_aside: Path | None
    likelihoods: int = 0
    """Likelihood-probe contexts (``probe: "likelihood"`` lines)."""


@dataclass(frozen=True)
class RecordLine:
    """One records.jsonl line, read back: a user turn or a likelihood-probe context, the
    answer it followed (when the line carries the answer's text) and its verdicts."""

    record: UserTurnRecord | LikelihoodRecord
    answer: AnswerRecord | None = None
    judgments: tuple[Judgment, ...] = ()
    item_sha: str | None = None
    """The content hash of the dataset item (absent from lines of older versions)."""


T = TypeVar("T")
_ID = {"key": "id"}
"""Record field -> line key, where they differ (``record_line``, ``LikelihoodRecord.to_line``)."""


def recover(run_dir: Path, force: bool = False) -> RecoverResult:
    """Rebuild ``run_dir``'s store from its ``records.jsonl`` (and manifest).

    Every line is read and checked before anything is touched; the new store is built
    beside the old one and swapped in at the end, so a bad line or a kill leaves the run
    directory as it was.
    """
    records = run_dir / "records.jsonl"
    if not records.is_file():
        raise UserError("no records.jsonl to recover from", file=str(run_dir))
    with run_lock(run_dir, "recover"):
        return _recover(run_dir, records, force)


def _recover(run_dir: Path, records: Path, force: bool) -> RecoverResult:
    parsed = [parse_line(obj, str(records), line) for line, obj in read_jsonl(records)]
    path = run_dir / STORE_NAME
    if path.exists():
        _check_replaceable(path, force)
    staging = path.with_name(path.name + ".recovering")
    for stale in (staging, *_sidecars(staging)):
        stale.unlink(missing_ok=True)
    with Store(staging) as store:
        result = _fill(store, run_dir, parsed)
    result.moved_aside = _move_aside(path) if path.exists() else None
    staging.rename(path)
    with open_run(run_dir, writer="recover") as store:
        write_outputs(run_dir, store)
    return result


def _fill(store: Store, run_dir: Path, parsed: list[RecordLine]) -> RecoverResult:
    """Load every parsed line in file order (records.jsonl is written in store order,
    so the rebuilt store exports the same file)."""
    _restore_manifest(run_dir, store)
    result = RecoverResult(0, 0, 0, None)
    seen: set[str] = set()
    with store.transaction():
        for line in parsed:
            if line.answer is not None and line.answer.key not in seen:
                store.put_answer(line.answer)
                seen.add(line.answer.key)
            if isinstance(line.record, LikelihoodRecord):
                store.put_likelihood(line.record)
                result.likelihoods += 1
            else:
                store.put_user_turn(line.record)
                result.user_turns += 1
            for v in line.judgments:
                store.put_judgment(line.record.key, v)
                result.judgments += 1
            if line.item_sha is not None:
                store.put_item_hash(line.record.dataset, line.record.item_id, line.item_sha)
    store.checkpoint()
    result.answers = len(seen)
    return result


def _sidecars(path: Path) -> list[Path]:
    return [path.with_name(path.name + s) for s in ("-wal", "-shm")]


def _check_replaceable(path: Path, force: bool) -> None:
    """A store that opens and holds results is kept unless --force."""
    try:
        with Store(path) as store:
            healthy = store.count_records() > 0
    except UserError:
        healthy = False
    if healthy and not force:
        raise UserError(
            "the store is readable and holds results; pass --force to rebuild it anyway",
            file=str(path),
        )


def _move_aside(path: Path) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.broken-{stamp}")
    path.rename(aside)
    for side in _sidecars(path):
        if side.exists():
            side.rename(aside.with_name(aside.name + side.name[len(path.name) :]))
    return aside


def _restore_manifest(run_dir: Path, store: Store) -> None:
    """The frozen date and the config fingerprints, so a rerun renders the same prompts."""
    path = run_dir / "manifest.yaml"
    if not path.is_file():
        return
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError):
        return  # the records alone are enough; the date is then today's on the next run
    if isinstance(data, dict):
        if data.get("frozen_date"):
            store.set_meta_default("frozen_date", str(data["frozen_date"]))
        for cid, opts in (data.get("configs") or {}).items():
            store.put_config(str(cid), dict(opts or {}))


def parse_line(obj: dict[str, Any], file: str, line: int) -> RecordLine:
    """One records.jsonl line as the records it was written from, checked against their
    field types; anything else is one line naming the file, line and field."""
    try:
        sha = obj.get("item_sha")
        if sha is not None and not isinstance(sha, str):
            raise UserError("not a records.jsonl line: not a string", field="item_sha")
        if line_record(obj) is LikelihoodRecord:
            rec = _valid(LikelihoodRecord, _by_field(LikelihoodRecord, obj, _ID), _ID)
            return RecordLine(rec, _answer(obj, rec), item_sha=sha)
        turn = _turn(obj)
        verdicts = tuple(_judgment(j) for j in obj.get("judgments") or [])
        return RecordLine(turn, _answer(obj, turn), verdicts, sha)
    except UserError as exc:
        raise UserError(exc.message, file=file, line=line, field=exc.field) from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"not a records.jsonl line ({exc!r})", file=file, line=line) from exc


def _by_field(
    cls: type[Any], obj: dict[str, Any], names: dict[str, str], only: bool = False
) -> dict[str, Any]:
    """The line's value of every field of the record class ``cls`` (under its line key,
    ``names`` giving the renamed ones; with ``only``, just the fields ``names`` lists).
    Taking fields by name, not from a hand-kept list, means a field the writer puts on
    the line comes back without a change here. A key missing from the line, or a null
    where the field's default is not (lines of older versions), takes the default."""
    out: dict[str, Any] = {}
    for f in fields(cls):
        if only and f.name not in names:
            continue
        key = names.get(f.name, f.name)
        if key not in obj:
            continue
        if obj[key] is None and f.default is not MISSING and f.default is not None:
            continue
        out[f.name] = obj[key]
    return out


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}
"""One validator per record class, built on first use (the CLI imports this module on
every start, and building one takes tens of milliseconds)."""


def _adapter(cls: type[Any]) -> TypeAdapter[Any]:
    if cls not in _ADAPTERS:
        _ADAPTERS[cls] = TypeAdapter(cls)
    return _ADAPTERS[cls]


def _valid(cls: type[T], values: dict[str, Any], names: dict[str, str]) -> T:
    """The record, its fields checked against their annotations (a line edited by hand
    or cut short is refused before the store is touched, not found broken later)."""
    try:
        rec = _adapter(cls).validate_python(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(p) for p in err["loc"]]
        where = ".".join([names.get(loc[0], loc[0]), *loc[1:]]) if loc else None
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise UserError(f"not a records.jsonl line: {err['msg']}{more}", field=where) from exc
    assert isinstance(rec, cls)
    return rec


def _turn(obj: dict[str, Any]) -> UserTurnRecord:
    """A user turn from its line; lines written before records carried ``answer_key`` and
    ``config`` (userturn 0.1) get a key derived from the answer and the config ``legacy``."""
    values = _by_field(UserTurnRecord, obj, _ID)
    values["config"] = values.get("config") or LEGACY_CONFIG
    if not values.get("answer_key"):
        values["answer_key"] = content_key(
            "recovered", obj["dataset"], obj["item_id"], obj.get("answer")
        )
    return _valid(UserTurnRecord, values, _ID)


def _answer(obj: dict[str, Any], turn: UserTurnRecord | LikelihoodRecord) -> AnswerRecord | None:
    """The answer a user turn (or a likelihood context) followed. Fields an older line
    doesn't carry (token counts, SHAs, the scorer's detail) take their defaults; older
    likelihood lines carry no answer at all, so a rerun makes theirs again."""
    if obj.get("answer") is None:
        return None
    values = _by_field(AnswerRecord, obj, ANSWER_LINE_KEYS, only=True)
    values["model"] = values.get("model") or ""
    values["finish"] = values.get("finish") or "stop"
    values["final"] = _final(str(values["text"]), values.get("reasoning"), values["finish"])
    ids = {"key": turn.answer_key, "item_id": turn.item_id, "dataset": turn.dataset}
    return _valid(AnswerRecord, {**values, **ids, "config": turn.config}, ANSWER_LINE_KEYS)


def _final(text: str, reasoning: str | None, finish: str) -> str:
    """The final answer as the worker split it. A stored reasoning part whose opener is
    not in the text means the prompt opened the block (the worker split ``opened``)."""
    if finish == "length_in_reasoning":
        return ""
    return split_reasoning(text, opened=reasoning is not None).final


def _judgment(j: dict[str, Any]) -> Judgment:
    return Judgment.from_row({**j, "version": j.get("version", "")})
