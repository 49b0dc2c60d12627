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
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from userturn.cli import output
from userturn.config import RunConfig
from userturn.perturb import load_perturbation
from userturn.run import driver
from userturn.run.executors import Job
from userturn.run.store import STORE_NAME, open_run
from userturn.run.worker import samples_at


def check(cfg: RunConfig) -> None:
    """Every model spec and perturbation, and the template file, before any work."""
    driver.check_plan(cfg)


@dataclass(frozen=True)
class Stored:
    """What ``--out`` already holds of this plan (matched per model slot)."""

    answers: int = 0
    turns: int = 0
    judged: dict[str, int] | None = None


def dry_run(cfg: RunConfig, out: Path | None) -> int:
    out = out or driver.default_out(cfg)
    driver.check_out(out)
    jobs = driver.load_jobs(cfg)
    if cfg.probe != "generate":
        return _dry_run_probe(cfg, out, jobs)
    judges = driver.load_judges(cfg)
    try:
        perts = [load_perturbation(p).id for p in cfg.perturbations]
        stored = _stored(out, cfg, jobs, perts, [j.id for j in judges])
        answers = sum(1 for j in jobs for it in j.items if not it.held_out) * len(cfg.models)
        turns = driver.planned_user_turns(cfg, jobs) * len(cfg.models)
        n_items = sum(len(j.items) for j in jobs)
        say = output.say
        say(
            f"run directory: {out}" + (" (exists: counts below are after resume)" if stored else "")
        )
        say(
            f"grid: {len(cfg.models)} model(s) x {len(jobs)} dataset(s) ({n_items} items) "
            f"x T={cfg.temperatures} x k={cfg.samples} x perturbations={cfg.perturbations} "
            f"x judges={cfg.judges}",
        )
        done = stored or Stored()
        say(
            f"model calls: {answers - done.answers} answers + {turns - done.turns} user turns "
            f"left to generate ({done.answers} answers and {done.turns} user turns stored)"
        )
        for judge in judges:
            left = turns - (done.judged or {}).get(judge.id, 0)
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


def _dry_run_probe(cfg: RunConfig, out: Path, jobs: list[Job]) -> int:
    """The likelihood probe and rollouts count contexts and conversations, not the
    generation grid: a likelihood context costs one scoring pass and no judge call; a
    rollout costs up to ``turns`` answers and user turns (``best_of`` candidates each),
    fewer when ``--stop-on degenerate`` ends it early."""
    say = output.say
    n_items = sum(len(j.items) for j in jobs)
    say(f"run directory: {out}" + (" (exists: stored work is reused)" if out.exists() else ""))
    if cfg.probe == "likelihood":
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
