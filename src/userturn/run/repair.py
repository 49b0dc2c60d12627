"""Repairs of a run directory: ``rescore`` (re-apply the current scorers to stored
answers) and ``recover`` (rebuild a lost or damaged store from ``records.jsonl``).

Why rescore: accuracy is stored with each answer when it is generated, so a fixed
scorer (a better number extractor, a new verifier) would otherwise never reach old
runs. The gold data is stored with each answer for exactly this.

Why recover: ``records.jsonl`` is a complete copy of what a run produced (every user
turn with its context, answer, keys and verdicts), so a store that was deleted, zeroed
or damaged can be rebuilt from it, and a rerun then makes no model call for what the
records hold. A damaged store is moved aside, never deleted.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from userturn.chat import split_reasoning
from userturn.datasets import load_dataset
from userturn.datasets.base import read_jsonl
from userturn.errors import UserError
from userturn.run.outputs import write_outputs
from userturn.run.records import AnswerRecord, UserTurnRecord, content_key
from userturn.run.store import LEGACY_CONFIG, STORE_NAME, Store, open_run
from userturn.types import AnswerFinish, Item, Judgment


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
    with open_run(run_dir) as store:
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


# recover ----------------------------------------------------------------------------------
@dataclass
class RecoverResult:
    user_turns: int
    answers: int
    judgments: int
    moved_aside: Path | None


def recover(run_dir: Path, force: bool = False) -> RecoverResult:
    """Rebuild ``run_dir``'s store from its ``records.jsonl`` (and manifest).

    Every line is read and checked before anything is touched; the new store is built
    beside the old one and swapped in at the end, so a bad line or a kill leaves the run
    directory as it was.
    """
    records = run_dir / "records.jsonl"
    if not records.is_file():
        raise UserError("no records.jsonl to recover from", file=str(run_dir))
    parsed = [_parse_line(obj, str(records), line) for line, obj in read_jsonl(records)]
    path = run_dir / STORE_NAME
    if path.exists():
        _check_replaceable(path, force)
    staging = path.with_name(path.name + ".recovering")
    for stale in (staging, *_sidecars(staging)):
        stale.unlink(missing_ok=True)
    with Store(staging) as store:
        counts = _fill(store, run_dir, parsed)
    moved = _move_aside(path) if path.exists() else None
    staging.rename(path)
    with open_run(run_dir) as store:
        write_outputs(run_dir, store)
    return RecoverResult(*counts, moved)


def _fill(
    store: Store,
    run_dir: Path,
    parsed: list[tuple[UserTurnRecord, AnswerRecord | None, list[Judgment]]],
) -> tuple[int, int, int]:
    _restore_manifest(run_dir, store)
    seen: set[str] = set()
    judgments = 0
    with store.transaction():
        for turn, answer, verdicts in parsed:
            if answer is not None and answer.key not in seen:
                store.put_answer(answer)
                seen.add(answer.key)
            store.put_user_turn(turn)
            for v in verdicts:
                store.put_judgment(turn.key, v)
                judgments += 1
    store.checkpoint()
    return len(parsed), len(seen), judgments


def _sidecars(path: Path) -> list[Path]:
    return [path.with_name(path.name + s) for s in ("-wal", "-shm")]


def _check_replaceable(path: Path, force: bool) -> None:
    """A store that opens and holds results is kept unless --force."""
    try:
        with Store(path) as store:
            healthy = store.count_user_turns() > 0
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


def _parse_line(
    obj: dict[str, Any], file: str, line: int
) -> tuple[UserTurnRecord, AnswerRecord | None, list[Judgment]]:
    try:
        turn = _turn(obj)
        answer = _answer(obj, turn)
        verdicts = [_judgment(j) for j in obj.get("judgments") or []]
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"not a records.jsonl line ({exc!r})", file=file, line=line) from exc
    return turn, answer, verdicts


def _turn(obj: dict[str, Any]) -> UserTurnRecord:
    """A user turn from its line; lines written before records carried ``answer_key`` and
    ``config`` (userturn 0.1) get a key derived from the answer and the config ``legacy``."""
    answer_key = obj.get("answer_key") or content_key(
        "recovered", obj["dataset"], obj["item_id"], obj.get("answer")
    )
    return UserTurnRecord(
        key=str(obj["id"]),
        answer_key=str(answer_key),
        item_id=str(obj["item_id"]),
        model=str(obj["model"]),
        dataset=str(obj["dataset"]),
        config=str(obj.get("config") or LEGACY_CONFIG),
        temperature=obj["temperature"],
        sample=int(obj["sample"]),
        seed=obj.get("seed"),
        perturbation=str(obj["perturbation"]),
        messages=tuple(obj["messages"]),
        family=str(obj.get("family") or ""),
        probe=obj.get("probe", "generate"),
        turn=int(obj.get("turn") or 1),
        prompt_sha=obj.get("prompt_sha"),
        template_sha=obj.get("template_sha"),
        content_survived=bool(obj.get("content_survived", True)),
        removed=obj.get("removed"),
        reference_turn=obj.get("reference_turn"),
        user_turn=str(obj.get("user_turn") or ""),
        user_finish=str(obj.get("user_finish") or ""),
        thinking_markup=bool(obj.get("thinking_markup")),
    )


def _answer(obj: dict[str, Any], turn: UserTurnRecord) -> AnswerRecord | None:
    if obj.get("answer") is None:
        return None
    text = str(obj["answer"])
    finish: AnswerFinish = obj.get("answer_finish") or "stop"
    final = "" if finish == "length_in_reasoning" else split_reasoning(text).final
    return AnswerRecord(
        key=turn.answer_key,
        item_id=turn.item_id,
        dataset=turn.dataset,
        model=str(obj.get("answer_model") or ""),
        config=turn.config,
        text=text,
        final=final,
        finish=finish,
        reasoning=obj.get("answer_reasoning"),
        correct=obj.get("correct"),
        reference=obj.get("answer_gold"),
    )


def _judgment(j: dict[str, Any]) -> Judgment:
    return Judgment.from_row({**j, "version": j.get("version", "")})


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
