"""Checks before ``userturn run`` starts, and ``run --dry-run``.

Why: a grid fails best before its first model call. :func:`check` resolves every model
spec (options included, no weights loaded) and every perturbation, so a typo in the
second ``--model`` no longer surfaces after the first model's rows are stored.
``--dry-run`` goes further without generating anything: it loads the datasets and
judges, checks ``--out``, and, when ``--out`` already holds a run, counts what is
stored, so the numbers it prints are what is left to do.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from userturn import registry
from userturn.cli import output, speed
from userturn.config import RunConfig
from userturn.judges import normalize_judge_spec
from userturn.perturb import load_perturbation
from userturn.redact import redact
from userturn.run import driver
from userturn.run.probes.base import Job
from userturn.run.worker import samples_at
from userturn.rundir.store import STORE_NAME, open_run


def check(cfg: RunConfig) -> None:
    """Every model spec (a GGUF file read by llama.cpp's own reader), perturbation and
    the template file, and every judge spec, before any work (and before ``run`` says
    what it will do)."""
    driver.check_plan(cfg)
    for judge in cfg.judges:
        registry.judge_spec(judge)


@dataclass(frozen=True)
class Stored:
    """What ``--out`` already holds of this plan (matched per model slot)."""

    answers: int = 0
    turns: int = 0
    judged: dict[str, int] | None = None


@dataclass(frozen=True)
class Size:
    """What a generate run asks for and what is left of it after ``--out``'s store."""

    answers: int
    turns: int
    items: int
    done: Stored
    resumed: bool

    @property
    def calls_left(self) -> int:
        return max(0, self.answers - self.done.answers) + max(0, self.turns - self.done.turns)


def size(cfg: RunConfig, out: Path, jobs: list[Job], judges: list[str] | None = None) -> Size:
    perts = [load_perturbation(p).id for p in cfg.perturbations]
    judges = [normalize_judge_spec(j) for j in cfg.judges] if judges is None else judges
    stored = _stored(out, cfg, jobs, perts, judges)
    answers = sum(1 for j in jobs for it in j.items if not it.held_out) * len(cfg.models)
    turns = driver.planned_user_turns(cfg, jobs) * len(cfg.models)
    items = sum(len(j.items) for j in jobs)
    return Size(answers, turns, items, stored or Stored(), stored is not None)


def grid_line(cfg: RunConfig, jobs: list[Job], items: int) -> str:
    """The grid in one line; judge specs may carry a base URL with credentials."""
    temps = ",".join(f"{t:g}" for t in cfg.temperatures)
    return redact(
        f"{len(cfg.models)} model(s) x {len(jobs)} dataset(s) ({items} items) x T={temps} "
        f"x k={cfg.samples} x perturbations={','.join(cfg.perturbations)} "
        f"x judges={','.join(cfg.judges) or 'none'}"
    )


def time_left(cfg: RunConfig, calls: int) -> str:
    """The estimate per model: calls split evenly over the grid's models."""
    per = calls // max(1, len(cfg.models))
    if len(cfg.models) == 1:
        return speed.estimate(cfg.models[0], calls)
    return "; ".join(f"{m}: {speed.estimate(m, per)}" for m in cfg.models)


def names(jobs: list[Job]) -> str:
    """``gsm8k (5 of 100 items), healthbench (213 items)``."""
    parts = []
    for job in jobs:
        avail = job.dataset.describe().get("available")
        used = len(job.items)
        parts.append(f"{job.dataset.id} ({used}" + (f" of {avail}" if avail else "") + " items)")
    return ", ".join(parts)


def in_background() -> bool:
    """A background job of an interactive terminal (``cmd &``): its stdin is the
    terminal, whose foreground process group is another one."""
    try:
        fd = sys.stdin.fileno()
        return os.isatty(fd) and os.getpgrp() != os.tcgetpgrp(fd)
    except (OSError, ValueError, AttributeError):
        return False


def split_warning(cfg: RunConfig, background: bool) -> str | None:
    """An unquoted ``--model 'm?a=1&b=2'`` makes the shell start ``userturn run --model
    m?a=1`` in the background and drop ``b=2``: name that when it looks like it."""
    specs = [*cfg.models, *cfg.datasets, *cfg.judges]
    if not background or not any("?" in s for s in specs):
        return None
    return (
        "warning: userturn runs in the background of this terminal with a spec that has "
        "options; if you typed an unquoted & in it, the shell split the spec there and "
        "started this run: stop it with `kill %1` (or fg, then Ctrl-C) and quote the spec, "
        "e.g. --model 'smollm2-135m?n_ctx=2048&n_threads=1'"
    )


SIZE_LINE = "progress 0s: "
"""The size line opens the run's progress lines: like them it is news, not an error, so
a log reader (and a script that keeps stderr's error lines) can tell it apart."""


def announce(cfg: RunConfig, out: Path | None) -> None:
    """One line on stderr before a run starts: its size and how long it should take, so
    a bare ``userturn run`` (100 items, 300 generations) does not start without a word."""
    warning = split_warning(cfg, in_background())
    if warning:
        print(redact(warning), file=sys.stderr)
    print(redact(SIZE_LINE + size_line(cfg, out or driver.default_out(cfg))), file=sys.stderr)


def size_line(cfg: RunConfig, out: Path) -> str:
    """What the run will do and how long it should take (specs may carry credentials:
    the caller redacts)."""
    jobs = driver.load_jobs(cfg)
    return SIZE_LINES[cfg.probe](cfg, out, jobs)


def _likelihood_size(cfg: RunConfig, out: Path, jobs: list[Job]) -> str:
    items = sum(len(j.items) for j in jobs)
    n = driver.planned_user_turns(cfg, jobs) * len(cfg.models)
    grid = (
        f"{len(cfg.models)} model(s) x {len(jobs)} dataset(s) ({items} items) "
        f"x perturbations={','.join(cfg.perturbations)}"
    )
    return f"likelihood: {grid}: {n} contexts to score, no judge calls"


def _rollout_size(cfg: RunConfig, out: Path, jobs: list[Job]) -> str:
    items = sum(len(j.items) for j in jobs)
    n = items * samples_at(cfg.temperatures[0], cfg.samples) * len(cfg.models)
    return (
        f"rollout: {grid_line(cfg, jobs, items)}: {n} conversations of up to {cfg.turns} user turns"
    )


def _generate_size(cfg: RunConfig, out: Path, jobs: list[Job]) -> str:
    sz = size(cfg, out, jobs)
    left = f"{sz.answers - sz.done.answers} answers + {sz.turns - sz.done.turns} user turns"
    return (
        f"run: {grid_line(cfg, jobs, sz.items)}: {left} to generate"
        + (" (the rest is stored)" if sz.resumed else "")
        + f"; time: {time_left(cfg, sz.calls_left)}; `--dry-run` shows the plan"
    )


def dry_run(cfg: RunConfig, out: Path | None) -> int:
    out = out or driver.default_out(cfg)
    driver.check_out(out)
    jobs = driver.load_jobs(cfg)
    say = output.say
    say(redact(f"models: {', '.join(cfg.models)}"))
    say(f"datasets: {names(jobs)}")
    return DRY_RUNS[cfg.probe](cfg, out, jobs)


def _dry_run_generate(cfg: RunConfig, out: Path, jobs: list[Job]) -> int:
    say = output.say
    judges = driver.load_judges(cfg)
    try:
        sz = size(cfg, out, jobs, [j.id for j in judges])
        done = sz.done
        say(
            f"run directory: {out}"
            + (" (exists: counts below are after resume)" if sz.resumed else "")
        )
        say(f"grid: {grid_line(cfg, jobs, sz.items)}")
        say(
            f"model calls: {sz.answers - done.answers} answers + {sz.turns - done.turns} user "
            f"turns left to generate ({done.answers} answers and {done.turns} user turns stored)"
        )
        say(f"time: {time_left(cfg, sz.calls_left)}")
        for judge in judges:
            left = sz.turns - (done.judged or {}).get(judge.id, 0)
            est = judge.estimate(left)
            cost = est.get("cost_usd")
            say(
                f"judge {judge.id}: {est.get('calls', 0)} calls, estimated cost "
                + ("unknown (set a price table)" if cost is None else f"${cost:.4f}")
            )
    finally:
        for judge in judges:
            judge.close()
    return 0


def _dry_run_likelihood(cfg: RunConfig, out: Path, jobs: list[Job]) -> int:
    """The likelihood probe counts contexts, not the generation grid: a context costs
    one scoring pass and no judge call."""
    say = output.say
    n_items = sum(len(j.items) for j in jobs)
    say(f"run directory: {out}" + (" (exists: stored work is reused)" if out.exists() else ""))
    contexts = driver.planned_user_turns(cfg, jobs) * len(cfg.models)
    stored = 0
    if (out / STORE_NAME).exists():
        with open_run(out) as store:
            stored = len(store.likelihood_keys())
    say(
        f"likelihood probe: {len(cfg.models)} model(s) x {len(jobs)} dataset(s) "
        f"({n_items} items) x perturbations={cfg.perturbations}"
    )
    say(f"contexts to score: {max(0, contexts - stored)} ({stored} stored); no judge calls")
    say(_scored_tokens(cfg, jobs))
    return 0


def _dry_run_rollout(cfg: RunConfig, out: Path, jobs: list[Job]) -> int:
    """Rollouts count conversations: each costs up to ``turns`` answers and user turns
    (``best_of`` candidates each), fewer when ``--stop-on degenerate`` ends it early."""
    say = output.say
    n_items = sum(len(j.items) for j in jobs)
    say(f"run directory: {out}" + (" (exists: stored work is reused)" if out.exists() else ""))
    temp = cfg.temperatures[0]
    convs = n_items * samples_at(temp, cfg.samples) * len(cfg.models)
    say(
        f"rollouts: {len(cfg.models)} model(s) x {n_items} items x "
        f"k={samples_at(temp, cfg.samples)} at T={temp}: {convs} conversations"
    )
    say(
        f"at most {convs * cfg.turns} user turns ({cfg.turns} per conversation, "
        f"{convs * cfg.turns * cfg.best_of} candidates with best-of {cfg.best_of}), "
        f"each judged by {', '.join(cfg.judges)}"
    )
    return 0


SIZE_LINES: dict[str, Callable[[RunConfig, Path, list[Job]], str]] = {
    "generate": _generate_size,
    "likelihood": _likelihood_size,
    "rollout": _rollout_size,
}
"""Each probe's size line (what the run will do), by probe."""
DRY_RUNS: dict[str, Callable[[RunConfig, Path, list[Job]], int]] = {
    "generate": _dry_run_generate,
    "likelihood": _dry_run_likelihood,
    "rollout": _dry_run_rollout,
}
"""Each probe's ``--dry-run`` plan, by probe."""


def _stored(
    out: Path, cfg: RunConfig, jobs: list[Job], perts: list[str], judges: list[str]
) -> Stored | None:
    """Stored rows that belong to this plan: same config fingerprint, dataset, item,
    temperature, sample and perturbation. Model ids are only known once a backend is
    loaded, so each planned slot counts at most ``len(models)`` stored models."""
    if not ((out / STORE_NAME).exists() or (out / "records.jsonl").exists()):
        return None
    with open_run(out) as store:
        date = store.get_meta("frozen_date") or cfg.frozen_date or dt.date.today().isoformat()
        config_id, _ = cfg.fingerprint(date)
        slots = _slots(cfg, jobs, perts)
        items = {(j.dataset.id, it.id) for j in jobs for it in j.items if not it.held_out}
        cap = len(cfg.models)
        turns: Counter[tuple[object, ...]] = Counter()
        keys: dict[tuple[object, ...], list[str]] = {}
        for f in store.turn_facts():
            slot = (f.dataset, f.item_id, f.temperature, f.sample, f.perturbation)
            if f.config == config_id and slot in slots and f.model != driver.HUMAN_REFERENCE:
                turns[slot] += 1
                keys.setdefault(slot, []).append(f.key)
        answers: Counter[tuple[str, str]] = Counter(
            (a.dataset, a.item_id)
            for a in store.answers()
            if a.config == config_id and (a.dataset, a.item_id) in items
        )
        judged = {}
        for judge in judges:
            states = store.judgment_states(judge)
            judged[judge] = sum(min(cap, sum(1 for k in ks if k in states)) for ks in keys.values())
    return Stored(
        answers=sum(min(cap, n) for n in answers.values()),
        turns=sum(min(cap, n) for n in turns.values()),
        judged=judged,
    )


def _slots(cfg: RunConfig, jobs: list[Job], perts: list[str]) -> set[tuple[object, ...]]:
    return {
        (j.dataset.id, it.id, t, s, p)
        for j in jobs
        for it in j.items
        for t in cfg.temperatures
        for s in range(samples_at(t, cfg.samples))
        for p in perts
    }


def _scored_tokens(cfg: RunConfig, jobs: list[Job]) -> str:
    """How many tokens the likelihood probe scores (all contexts, stored ones included),
    estimated from characters: a dry run loads no tokenizer."""
    from userturn.run.likelihood_plan import CHARS_PER_TOKEN, scored_characters

    conts = chars = 0
    for job in jobs:
        for item in job.items:
            n, c = scored_characters(item, job.items)
            conts, chars = conts + n, chars + c
    factor = len(cfg.models) * len(cfg.perturbations)
    tokens = round(chars * factor / CHARS_PER_TOKEN)
    return (
        f"scored: {conts * factor} continuations, about {tokens} tokens "
        f"({chars * factor} characters at {CHARS_PER_TOKEN:g} per token), each after its "
        "prompt under the user header, the assistant header and 3 counterfactual answers"
    )
