"""The driver: plans the grid, feeds an executor, owns the store, writes the outputs.

Only the driver writes the store (one writer, small transactions), so the local and Ray
executors resume the same way.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from userturn.backends import load_backend
from userturn.config import RunConfig
from userturn.datasets import Dataset, load_dataset
from userturn.errors import UserError
from userturn.export import STORE_NAME, manifest, write_json, write_manifest, write_outputs
from userturn.judges import Judge, load_judge
from userturn.judging import judge_rows
from userturn.pipeline import AnswerEvent, Event, ItemWorker, RunStats, UserEvent, samples_at
from userturn.store import Store, UserTurnRow, content_key
from userturn.types import Item

log = logging.getLogger(__name__)


class Progress(Protocol):
    def stage(self, name: str, total: int) -> None: ...
    def advance(self, name: str, n: int = 1) -> None: ...


class NullProgress:
    def stage(self, name: str, total: int) -> None:
        pass

    def advance(self, name: str, n: int = 1) -> None:
        pass


@dataclass
class Job:
    dataset: Dataset
    items: list[Item]


class Executor(Protocol):
    def run_model(
        self,
        model: str,
        cfg: RunConfig,
        date: dt.date,
        jobs: list[Job],
        known: dict[str, dict[str, Any]],
        done: set[str],
    ) -> Iterator[Event]: ...

    def describe_model(self) -> dict[str, Any]: ...


class LocalExecutor:
    """In-process: one backend, chunks of ``backend.batch_items`` items."""

    def __init__(self) -> None:
        self._described: dict[str, Any] = {}

    def run_model(
        self,
        model: str,
        cfg: RunConfig,
        date: dt.date,
        jobs: list[Job],
        known: dict[str, dict[str, Any]],
        done: set[str],
    ) -> Iterator[Event]:
        backend = load_backend(model, defaults={"base_url": cfg.base_url})
        try:
            worker = ItemWorker(backend, cfg, date)
            self._described = {
                **backend.describe(),
                "template_sha": worker.template.sha,
                "template_source": worker.template.name,
                "template_preamble": worker.markers.preamble,
                "user_header": worker.markers.user_header,
                "user_stops": list(worker.markers.user_stops(worker.template)),
            }
            size = max(1, backend.batch_items)
            for job in jobs:
                for start in range(0, len(job.items), size):
                    chunk = job.items[start : start + size]
                    yield from worker.process(chunk, job.dataset, known, done)
        finally:
            backend.close()

    def describe_model(self) -> dict[str, Any]:
        return self._described


def make_executor(cfg: RunConfig) -> Executor:
    if cfg.executor == "ray":
        try:
            from userturn.ray_executor import RayExecutor
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("userturn"):
                raise UserError(
                    "the ray executor is not available in this build", field="executor"
                ) from exc
            raise UserError("ray is not installed: pip install 'userturn[ray]'") from exc
        return RayExecutor(cfg)  # type: ignore[no-any-return]
    return LocalExecutor()


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:60]


def default_out(cfg: RunConfig) -> Path:
    """``runs/<model>-<dataset>-<config hash>``: the same command resumes the same run."""
    model = cfg.models[0] if len(cfg.models) == 1 else f"{len(cfg.models)}models"
    data = cfg.datasets[0] if len(cfg.datasets) == 1 else f"{len(cfg.datasets)}datasets"
    return Path("runs") / f"{_slug(model)}-{_slug(data)}-{cfg.hash()}"


@dataclass
class RunResult:
    out: Path
    cells: list[dict[str, Any]]
    stats: RunStats
    jobs: list[Job] = field(default_factory=list)


def load_jobs(cfg: RunConfig) -> list[Job]:
    """Each dataset's first ``--limit`` items; bad rows fail, or are skipped and counted
    with ``--skip-bad-rows`` (the count goes to the manifest via ``describe()``)."""
    jobs = []
    for spec in cfg.datasets:
        ds = load_dataset(spec, skip_bad_rows=cfg.skip_bad_rows)
        jobs.append(Job(ds, ds.load_first(cfg.limit)))
    return jobs


HUMAN_REFERENCE = "human-reference"


def add_reference_rows(store: Store, rows: list[UserTurnRow], stats: RunStats) -> list[UserTurnRow]:
    """The real next user turn of each context (``--judge-reference``), as a user-turn row
    of the model ``human-reference``, so the same judges judge it and summary.json gets a
    cell for real people beside the model's. Temperature is None (nobody sampled it),
    sample 0, perturbation ``none``; the context is exactly the model rows' context. Keys
    are content hashes, so a rerun or a second model with the same context adds nothing."""
    done = store.user_turn_keys()
    out: dict[str, UserTurnRow] = {}
    for row in rows:
        ref = row.data.get("reference_turn")
        if ref is None or row.perturbation != "none" or row.model == HUMAN_REFERENCE:
            continue
        messages = row.data["messages"]
        key = content_key(HUMAN_REFERENCE, row.dataset, row.item_id, messages, ref)
        out.setdefault(
            key,
            UserTurnRow(
                key=key,
                answer_key=row.answer_key,
                item_id=row.item_id,
                model=HUMAN_REFERENCE,
                dataset=row.dataset,
                temperature=None,
                sample=0,
                seed=None,
                perturbation="none",
                data={
                    "messages": messages,
                    "user_turn": ref,
                    "user_finish": "human",
                    "family": "human",
                    "reference_turn": ref,
                    "prompt_sha": None,
                    "template_sha": None,
                    "context_model": row.model,
                },
            ),
        )
    if not out:
        log.warning(
            "--judge-reference: no real next user turns to judge (the datasets have "
            "none, or perturbation 'none' is not in the run)"
        )
    for key, ref_row in out.items():
        if key not in done:
            store.put_user_turn(ref_row)
            stats.extra["reference_rows"] = int(stats.extra.get("reference_rows", 0)) + 1
    return list(out.values())


def load_judges(cfg: RunConfig) -> list[Judge]:
    return [load_judge(j, base_url=cfg.judge_base_url, models=cfg.models) for j in cfg.judges]


def planned_user_turns(cfg: RunConfig, jobs: list[Job]) -> int:
    per_context = sum(samples_at(t, cfg.samples) for t in cfg.temperatures)
    return sum(len(j.items) for j in jobs) * len(cfg.perturbations) * per_context


def run(cfg: RunConfig, out: Path | None = None, progress: Progress | None = None) -> RunResult:
    out = out or default_out(cfg)
    progress = progress or NullProgress()
    judges = load_judges(cfg)  # fail at config time, before any generation
    jobs = load_jobs(cfg)
    out.mkdir(parents=True, exist_ok=True)
    store = Store(out / STORE_NAME)
    try:
        date = dt.date.fromisoformat(
            store.set_meta_default("frozen_date", cfg.frozen_date or dt.date.today().isoformat())
        )
        stats = RunStats()
        rows, described = _generate(cfg, jobs, store, date, stats, progress)
        if cfg.judge_reference:
            rows += add_reference_rows(store, rows, stats)
        _judge(store, judges, rows, stats, progress)
        cells = write_outputs(out, store)
        write_json(out / "run_stats.json", stats.to_json())
        write_manifest(
            out,
            manifest(
                cfg.model_dump(mode="json"),
                date.isoformat(),
                described,
                [
                    {**j.dataset.describe(), "id": j.dataset.id, "items_used": len(j.items)}
                    for j in jobs
                ],
            ),
        )
        return RunResult(out, cells, stats, jobs)
    finally:
        for judge in judges:
            judge.close()
        store.close()


def _generate(
    cfg: RunConfig,
    jobs: list[Job],
    store: Store,
    date: dt.date,
    stats: RunStats,
    progress: Progress,
) -> tuple[list[UserTurnRow], list[dict[str, Any]]]:
    known = dict(store.answers())
    done = store.user_turn_keys()
    rows: list[UserTurnRow] = []
    described = []
    n_items = sum(len(j.items) for j in jobs)
    for model in cfg.models:
        progress.stage(f"answers {model}", n_items)
        progress.stage(f"user turns {model}", planned_user_turns(cfg, jobs))
        executor = make_executor(cfg)
        for ev in executor.run_model(model, cfg, date, jobs, known, done):
            if isinstance(ev, AnswerEvent):
                _on_answer(ev, store, known, stats)
                progress.advance(f"answers {model}")
            else:
                _on_user(ev, store, done, stats)
                rows.append(ev.row)
                progress.advance(f"user turns {model}")
        described.append(executor.describe_model())
    return rows, described


def _on_answer(
    ev: AnswerEvent, store: Store, known: dict[str, dict[str, Any]], stats: RunStats
) -> None:
    if ev.generated:
        store.put_answer(
            ev.key, ev.item.id, str(ev.data.get("model", "")), ev.item.dataset, ev.data
        )
        known[ev.key] = ev.data
        stats.answers_generated += 1
        stats.model_calls += 1
        _count_tokens(stats, ev.data, "answer")
    else:
        if ev.key not in known:  # held-out: the given answer is stored, not generated
            store.put_answer(
                ev.key, ev.item.id, str(ev.data.get("model", "")), ev.item.dataset, ev.data
            )
            known[ev.key] = ev.data
        stats.answers_reused += 1


def _on_user(ev: UserEvent, store: Store, done: set[str], stats: RunStats) -> None:
    if ev.generated:
        store.put_user_turn(ev.row)
        done.add(ev.row.key)
        stats.generated += 1
        stats.model_calls += 1
        _count_tokens(stats, ev.row.data, "user")
    else:
        stats.reused += 1


def _count_tokens(stats: RunStats, data: dict[str, Any], stage: str) -> None:
    evaluated = int(data.get("prompt_tokens", 0)) - int(data.get("prompt_tokens_reused", 0))
    reused = int(data.get("prompt_tokens_reused", 0))
    stats.prompt_tokens_evaluated += evaluated
    stats.prompt_tokens_reused += reused
    for name, val in (
        (f"{stage}_prompt_tokens", evaluated + reused),
        (f"{stage}_prompt_tokens_reused", reused),
    ):
        stats.extra[name] = int(stats.extra.get(name, 0)) + val


def _judge(
    store: Store, judges: list[Judge], rows: list[UserTurnRow], stats: RunStats, progress: Progress
) -> None:
    if not judges:
        return
    progress.stage("judging", len(rows) * len(judges))
    written, calls = judge_rows(
        store, judges, rows, advance=lambda n: progress.advance("judging", n)
    )
    stats.judged += written
    stats.judge_calls += calls
    saved = sum(j.calls_saved() for j in judges)
    if saved:
        stats.extra["judge_calls_saved"] = saved
