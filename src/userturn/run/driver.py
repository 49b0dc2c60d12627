"""The driver: plans the grid, feeds an executor, owns the store, writes the outputs.

It runs any probe (``run.probes``) through any executor: the probe's stage works on the
executor's workers and yields events, and the driver stores each one as it comes. Only
the driver writes the store (one writer, small transactions), so every probe resumes
the same way under the local and Ray executors.

It also guards the run directory: ``--out`` is checked before anything is created, a
directory made by a run that failed before storing its first row is removed again, and
a directory whose rows were made with another config fingerprint is refused unless
``keep_configs`` asks to keep both as separate cells.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import random
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from userturn import registry
from userturn.analysis.cell import CellSummary
from userturn.config import RunConfig, config_changes
from userturn.datasets import load_dataset
from userturn.errors import UserError, read_text
from userturn.judges import Judge, load_judge
from userturn.perturb import load_perturbation
from userturn.run.events import AnswerEvent, JudgmentEvent, LikelihoodEvent, UserEvent
from userturn.run.executors import make_executor
from userturn.run.judge_stage import JudgeTally, judge_rows
from userturn.run.outputs import KEPT, manifest, write_json, write_manifest, write_outputs
from userturn.run.probes import Probe, probe_for
from userturn.run.probes.base import Job
from userturn.rundir.keys import content_key
from userturn.rundir.records import UserTurnRecord
from userturn.rundir.store import STORE_NAME, Store, hold, open_run
from userturn.types import Item

log = logging.getLogger(__name__)
HUMAN_REFERENCE = "human-reference"


class Progress(Protocol):
    def stage(self, name: str, total: int) -> None: ...
    def advance(self, name: str, n: int = 1) -> None: ...


class NullProgress:
    def stage(self, name: str, total: int) -> None:
        pass

    def advance(self, name: str, n: int = 1) -> None:
        pass


@dataclass
class RunStats:
    """What this invocation did (``run_stats.json``)."""

    generated: int = 0
    reused: int = 0
    answers_generated: int = 0
    answers_reused: int = 0
    model_calls: int = 0
    judge_calls: int = 0
    judged: int = 0
    prompt_tokens_evaluated: int = 0
    prompt_tokens_reused: int = 0
    extra: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "extra"}
        return {**out, **self.extra}

    def add(self, name: str, n: int) -> None:
        self.extra[name] = self.extra.get(name, 0) + n

    def count_tokens(self, stage: str, total: int, reused: int) -> None:
        self.prompt_tokens_evaluated += total - reused
        self.prompt_tokens_reused += reused
        self.add(f"{stage}_prompt_tokens", total)
        self.add(f"{stage}_prompt_tokens_reused", reused)


@dataclass
class RunResult:
    out: Path
    cells: list[CellSummary]
    stats: RunStats
    jobs: list[Job] = field(default_factory=list)
    config_id: str = ""
    judging: JudgeTally = field(default_factory=JudgeTally)


class RunInterrupted(Exception):
    """Ctrl-C or SIGTERM during a run: what is stored stays, the outputs are rewritten to
    cover it, and the same command resumes."""

    def __init__(self, out: Path, stored: int) -> None:
        where = (
            f"in {out} (records.jsonl and summary.json cover them)"
            if stored
            else "(the new run directory was removed)"
        )
        super().__init__(
            f"interrupted: {stored} records stored {where}; run the same command to resume"
        )
        self.out = out
        self.stored = stored


def interrupted(out: Path, store: Store) -> RunInterrupted:
    """The stop of an interrupted run, after writing its outputs from the store (a run
    stopped by a scheduler's SIGTERM is then readable as far as it got)."""
    stored = store.count_records()
    if stored:
        write_outputs(out, store)
    return RunInterrupted(out, stored)


# planning ---------------------------------------------------------------------------------
def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:60]


def default_out(cfg: RunConfig) -> Path:
    """``runs/<model>-<dataset>-<config hash>``: the same command resumes the same run."""
    model = cfg.models[0] if len(cfg.models) == 1 else f"{len(cfg.models)}models"
    data = cfg.datasets[0] if len(cfg.datasets) == 1 else f"{len(cfg.datasets)}datasets"
    return Path("runs") / f"{_slug(model)}-{_slug(data)}-{cfg.hash()}"


def load_jobs(cfg: RunConfig) -> list[Job]:
    """Each dataset's selected items; bad rows fail, or are skipped and counted with
    ``--skip-bad-rows`` (the count goes to the manifest via ``describe()``)."""
    probe = probe_for(cfg)
    jobs: list[Job] = []
    for spec in cfg.datasets:
        ds = load_dataset(spec, skip_bad_rows=cfg.skip_bad_rows)
        if any(j.dataset.id == ds.id for j in jobs):
            raise UserError(
                f"two datasets are both named {ds.id!r}; give the files different names",
                field="dataset",
            )
        items = select_items(ds, cfg)
        if not items:
            raise UserError(f"dataset {spec!r} has no items to run", field="dataset")
        probe.check_items(spec, items)
        jobs.append(Job(ds, items))
    return jobs


def select_items(ds: Any, cfg: RunConfig) -> list[Any]:
    """``--items`` picks ids, then ``--sample`` draws N at random (seeded by ``--seed``,
    kept in dataset order), then ``--limit`` keeps the first N."""
    if cfg.items is None and cfg.sample is None:
        return list(ds.load_first(cfg.limit))
    items = list(ds.load())
    if cfg.items is not None:
        by_id = {it.id: it for it in items}
        missing = [i for i in cfg.items if i not in by_id]
        if missing:
            raise UserError(f"item id(s) not in {ds.id}: {', '.join(missing[:5])}", field="items")
        wanted = set(cfg.items)
        items = [it for it in items if it.id in wanted]
    if cfg.sample is not None and cfg.sample < len(items):
        keep = set(random.Random(cfg.seed).sample(range(len(items)), cfg.sample))
        items = [it for i, it in enumerate(items) if i in keep]
    return items[: cfg.limit] if cfg.limit else items


def check_plan(cfg: RunConfig) -> None:
    """Every model spec (options included; no weights loaded), perturbation and the
    template file, before any work: a typo in the second ``--model`` must not surface
    after the first model's rows are stored."""
    for model in cfg.models:
        _, spec = registry.model_spec(model)
        if spec.kind == "llamacpp":  # the file itself, by llama.cpp's reader: milliseconds
            from userturn.backends.llamacpp import LlamaCppBackend

            LlamaCppBackend(spec).check_file()
    for pert in cfg.perturbations:
        load_perturbation(pert)
    if cfg.chat_template is not None:
        read_text(Path(cfg.chat_template), "chat template file")
    probe_for(cfg).check()


def load_judges(cfg: RunConfig) -> list[Judge]:
    return [load_judge(j, base_url=cfg.judge_base_url, models=cfg.models) for j in cfg.judges]


def planned_user_turns(cfg: RunConfig, jobs: list[Job]) -> int:
    """The records the grid asks for: user turns, or the likelihood probe's contexts."""
    return probe_for(cfg).planned(jobs)


# the run directory --------------------------------------------------------------------
def check_out(out: Path) -> None:
    """Refuse an unusable ``--out`` before anything is created."""
    if out.exists() and not out.is_dir():
        raise UserError("--out is a file, expected a directory", file=str(out), field="out")
    parent = next((p for p in [out, *out.parents] if p.exists()), Path("."))
    if not parent.is_dir():
        raise UserError(f"{parent} is a file, not a directory", file=str(out), field="out")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"{parent} is not writable", file=str(out), field="out")


@contextmanager
def run_directory(out: Path, command: str = "run") -> Iterator[Store]:
    """The run's store, under the directory's writer lock (a second writer is refused);
    a directory this run created is removed again if the run fails before its first
    stored row, so a failed command leaves nothing behind."""
    check_out(out)
    created = [p for p in [out, *out.parents] if not p.exists()]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the run directory: {exc.strerror}", file=str(out)) from exc
    existing = (out / STORE_NAME).exists() or (out / "records.jsonl").exists()
    store = open_run(out) if existing else Store(out / STORE_NAME)
    hold(store, out, command)  # refused: the directory is another process's now, keep it
    try:
        yield store
    except BaseException:
        if created and store.count_records() == 0:
            shutil.rmtree(created[-1], ignore_errors=True)  # still ours: the lock is held
        store.close()
        raise
    store.close()


def register_config(store: Store, cfg: RunConfig, date: str) -> str:
    """The run's config id; refuse a store made with other settings unless asked."""
    config_id, options = cfg.fingerprint(date)
    known = store.configs()
    others = {cid: opts for cid, opts in known.items() if cid != config_id}
    if others and config_id not in known and not cfg.keep_configs:
        last_id, last = list(others.items())[-1]
        changes = config_changes(last, options) or [f"config {last_id}"]
        raise UserError(
            f"{store.path.parent} holds results made with other settings "
            f"({'; '.join(changes)}); use another --out, or --keep-configs to keep both "
            "as separate cells",
            field="out",
        )
    store.put_config(config_id, options)
    return config_id


def item_hash(item: Item) -> str:
    """What an item is, as far as a run can tell: its messages and its gold data (not
    its id, line number or other metadata)."""
    return content_key("item", item.messages, item.reference, item.reference_turn)


def register_items(store: Store, jobs: list[Job]) -> None:
    """Remember each item's content hash; refuse a dataset whose items changed.

    Why: cells are grouped by dataset name, and record keys hash the rendered context,
    so an edited file, or another file with the same name and ids, would silently add
    its contexts to the old cells instead of resuming them."""
    for job in jobs:
        known = store.item_hashes(job.dataset.id)
        mine = {it.id: item_hash(it) for it in job.items}
        changed = [i for i, h in mine.items() if known.get(i, h) != h]
        if changed:
            more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
            raise UserError(
                f"dataset {job.dataset.id!r} is not the data this run was made with: item "
                f"{changed[0]!r}{more} changed (an edited file, or another file of the same "
                "name); use another --out, or give the changed file another name",
                file=str(store.path.parent),
                field="dataset",
            )
        store.put_item_hashes(job.dataset.id, {i: h for i, h in mine.items() if i not in known})


# the run --------------------------------------------------------------------------------
def run(cfg: RunConfig, out: Path | None = None, progress: Progress | None = None) -> RunResult:
    """Run ``cfg.probe`` over the grid into ``out``, resuming what it already holds."""
    out = out or default_out(cfg)
    progress = progress or NullProgress()
    check_plan(cfg)
    judges = load_judges(cfg)  # fail at config time, before any generation
    try:
        for judge in judges:
            judge.check_reachable()
        jobs = load_jobs(cfg)
        probe = probe_for(cfg)
        with run_directory(out, probe.command) as store:
            try:
                return _run(probe, out, store, jobs, judges, progress)
            except KeyboardInterrupt:
                raise interrupted(out, store) from None
    finally:
        for judge in judges:
            judge.close()


def _run(
    probe: Probe,
    out: Path,
    store: Store,
    jobs: list[Job],
    judges: list[Judge],
    progress: Progress,
) -> RunResult:
    cfg = probe.cfg
    today = cfg.frozen_date or dt.date.today().isoformat()
    date = dt.date.fromisoformat(store.set_meta_default("frozen_date", today))
    config_id = register_config(store, cfg, date.isoformat())
    register_items(store, jobs)
    stats = RunStats()
    turns, described = _generate(probe, jobs, store, date, config_id, stats, progress)
    if cfg.judge_reference and probe.judges_reference():
        turns += add_reference_rows(store, turns, stats)
    tally = _judge(store, probe.judged_after(judges), turns, stats, progress)
    return finish_run(cfg, out, store, jobs, date, config_id, stats, described, tally)


def finish_run(
    cfg: RunConfig,
    out: Path,
    store: Store,
    jobs: list[Job],
    date: dt.date,
    config_id: str,
    stats: RunStats,
    described: list[dict[str, Any]],
    tally: JudgeTally,
) -> RunResult:
    """Write a finished invocation's outputs (records, summary, stats, manifest)."""
    cells = write_outputs(out, store)
    write_json(out / "run_stats.json", stats.to_json(), KEPT)
    datasets = [
        {**j.dataset.describe(), "id": j.dataset.id, "items_used": len(j.items)} for j in jobs
    ]
    info = manifest(
        cfg.model_dump(mode="json"), date.isoformat(), described, datasets, store.configs()
    )
    write_manifest(out, info)
    return RunResult(out, cells, stats, jobs, config_id, tally)


def _generate(
    probe: Probe,
    jobs: list[Job],
    store: Store,
    date: dt.date,
    config_id: str,
    stats: RunStats,
    progress: Progress,
) -> tuple[list[UserTurnRecord], list[dict[str, Any]]]:
    """Every model's work, stored event by event (the stages never write)."""
    cfg = probe.cfg
    known = probe.known(store)
    stored = set(known.answers)
    done = set(known.done)
    turns: list[UserTurnRecord] = []
    reused: set[str] = set()
    described = []
    n_items = sum(len(j.items) for j in jobs)
    unit = probe.unit
    for model in cfg.models:
        progress.stage(f"answers {model}", n_items)
        progress.stage(f"{unit} {model}", probe.planned(jobs))
        executor = make_executor(cfg)
        for ev in executor.run_model(probe, model, date, config_id, jobs, known):
            if isinstance(ev, AnswerEvent):
                on_answer(ev, store, stored, stats)
                known.answers.setdefault(ev.record.key, ev.record)
                if not ev.reply:
                    progress.advance(f"answers {model}")
            elif isinstance(ev, LikelihoodEvent):
                _on_likelihood(ev, store, done, stats)
                progress.advance(f"{unit} {model}")
            elif isinstance(ev, JudgmentEvent):
                _on_judgment(ev, store, stats)
            else:
                _on_user(ev, store, done, stats)
                if ev.generated:
                    turns.append(ev.record)
                else:
                    reused.add(ev.record.key)
                progress.advance(f"{unit} {model}")
        described.append(executor.describe_model())
    # A reused turn's event carries the planned record, without the text: the stored
    # record is what a judge (say, after a kill before judging) must read.
    turns += [t for t in store.user_turns() if t.key in reused]
    return turns, described


def on_answer(ev: AnswerEvent, store: Store, stored: set[str], stats: RunStats) -> None:
    rec = ev.record
    if rec.key not in stored:  # generated, or a held-out item's given answer seen first
        store.put_answer(rec)
        stored.add(rec.key)
    if ev.generated:
        stats.answers_generated += 1
        stats.model_calls += 1
        stats.count_tokens("answer", rec.prompt_tokens, rec.prompt_tokens_reused)
        stats.add("answer_completion_tokens", rec.completion_tokens)
    else:
        stats.answers_reused += 1


def _on_user(ev: UserEvent, store: Store, done: set[str], stats: RunStats) -> None:
    if not ev.generated:
        stats.reused += 1
        return
    rec = ev.record
    store.put_user_turn(rec)
    done.add(rec.key)
    stats.generated += 1
    stats.model_calls += ev.calls
    stats.judge_calls += ev.judge_calls
    stats.count_tokens("user", rec.prompt_tokens, rec.prompt_tokens_reused)
    stats.add("user_completion_tokens", rec.user_tokens)


def _on_judgment(ev: JudgmentEvent, store: Store, stats: RunStats) -> None:
    store.put_judgment(ev.key, ev.judgment)
    stats.judged += 1
    stats.judge_calls += int(ev.judgment.usage.get("calls", 0))


def _on_likelihood(ev: LikelihoodEvent, store: Store, done: set[str], stats: RunStats) -> None:
    if not ev.generated:
        stats.add("likelihood_reused", 1)
        return
    store.put_likelihood(ev.record)
    done.add(ev.record.key)
    stats.add("likelihood_scored", 1)
    stats.model_calls += 1
    stats.count_tokens("likelihood", ev.record.prompt_tokens, ev.record.prompt_tokens_reused)


def add_reference_rows(
    store: Store, turns: list[UserTurnRecord], stats: RunStats
) -> list[UserTurnRecord]:
    """The real next user turn of each context (``--judge-reference``), as a user-turn row
    of the model ``human-reference``, so the same judges judge it and summary.json gets a
    cell for real people beside the model's. Temperature is None (nobody sampled it),
    sample 0, perturbation ``none``; the context is exactly the model rows' context. Keys
    are content hashes, so a rerun or a second model with the same context adds nothing."""
    done = store.user_turn_keys()
    out: dict[str, UserTurnRecord] = {}
    for t in turns:
        ref = t.reference_turn
        if ref is None or t.perturbation != "none" or t.model == HUMAN_REFERENCE:
            continue
        key = content_key(t.config, HUMAN_REFERENCE, t.dataset, t.item_id, t.messages, ref)
        out.setdefault(key, _reference_row(key, t, ref))
    if not out:
        log.warning(
            "--judge-reference: no real next user turns to judge (the datasets have "
            "none, or perturbation 'none' is not in the run)"
        )
    for key, row in out.items():
        if key not in done:
            store.put_user_turn(row)
            stats.add("reference_rows", 1)
    return list(out.values())


def _reference_row(key: str, t: UserTurnRecord, ref: str) -> UserTurnRecord:
    return UserTurnRecord(
        key=key,
        answer_key=t.answer_key,
        item_id=t.item_id,
        model=HUMAN_REFERENCE,
        dataset=t.dataset,
        config=t.config,
        temperature=None,
        sample=0,
        seed=None,
        perturbation="none",
        messages=t.messages,
        family="human",
        reference_turn=ref,
        user_turn=ref,
        user_finish="human",
        context_model=t.model,
    )


def _judge(
    store: Store,
    judges: list[Judge],
    turns: list[UserTurnRecord],
    stats: RunStats,
    progress: Progress,
) -> JudgeTally:
    if not judges:
        return JudgeTally()
    progress.stage("judging", len(turns) * len(judges))
    tally = judge_rows(store, judges, turns, advance=lambda n: progress.advance("judging", n))
    stats.judged += tally.written
    stats.judge_calls += tally.calls
    saved = sum(j.calls_saved() for j in judges)
    if saved:
        stats.add("judge_calls_saved", saved)
    return tally
