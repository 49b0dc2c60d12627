"""Rollouts: the same weights play both sides of a conversation for N user turns.

Starting from each item, the model answers as the assistant, writes the next user turn
under its own user header, answers that, and so on, for ``turns`` user turns. Every
prompt is rendered by the probe's template code from the conversation so far, so each
step extends the previous prompt and llama.cpp reuses its KV prefix. Every user turn is
judged as it is written by the steering judge (``--select-judge``, else the first judge),
which decides ``--stop-on degenerate`` and the best-of-N choice; every other judge judges
every turn afterwards. Best-of-N needs a judge other than the selector to score the kept
turns: the selector's own verdicts on turns it picked are biased upward.

Best-of-N: at each step N candidate user turns are sampled (decoded together where the
backend batches samples), all are judged, and the most genuine is kept: highest
probability of genuine (the offline judge gives one), else a genuine verdict, ties to
the lowest seed. All candidates are recorded on the kept turn.

Resume: every step's key is a content hash of its rendered prompt (so of the whole
conversation before it), the sampling, the sample and turn, the seeds and, for best-of,
the choosing judge. The store is written after every step, so a rollout killed in the
middle of turn 3 resumes there, taking turns 1-2 from the store.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from userturn.backends import Backend, load_backend
from userturn.chat import (
    answer_finish,
    answer_prompt,
    has_thinking_markup,
    history_message,
    sha256,
    split_reasoning,
    user_turn_prompt,
)
from userturn.config import RunConfig
from userturn.judges import Judge
from userturn.run import driver
from userturn.run.events import AnswerEvent
from userturn.run.judge_stage import JudgeTally, judge_input, judge_rows
from userturn.run.worker import ItemWorker, samples_at
from userturn.rundir.keys import derive_seed
from userturn.rundir.records import AnswerRecord, UserTurnRecord
from userturn.rundir.store import Store
from userturn.types import GenRequest, Judgment, Message

log = logging.getLogger(__name__)


@dataclass
class Conversation:
    """One rollout in progress: the messages so far and the key of the last answer."""

    item: Any
    sample: int
    messages: list[Message]
    answer_key: str


class Roller:
    """Plays the conversations of one model; reads and writes the store step by step."""

    def __init__(
        self,
        worker: ItemWorker,
        store: Store,
        judges: list[Judge],
        stats: driver.RunStats,
        selector: Judge | None = None,
    ) -> None:
        self.w, self.store, self.judges, self.stats = worker, store, judges, stats
        self.steer = selector or (judges[0] if judges else None)
        """The judge that judges each turn as it is written: it chooses best-of
        candidates and decides ``stop_on``."""
        self.cfg = worker.cfg
        self.temperature = self.cfg.temperatures[0]
        self.turns_done = {t.key: t for t in store.user_turns(probe="rollout")}
        self.answers = {a.key: a for a in store.answers()}
        self.verdicts = store.judgments()

    @property
    def backend(self) -> Backend:
        return self.w.backend

    def roll(self, start: AnswerEvent) -> Iterator[UserTurnRecord]:
        """Every conversation (k samples) from one item's first answer."""
        for s in range(samples_at(self.temperature, self.cfg.samples)):
            ctx, _ = self.w.user_context(start.item, start.record, self.w.perturbations[0])
            conv = Conversation(start.item, s, ctx, start.record.key)
            yield from self._play(conv)

    def _play(self, conv: Conversation) -> Iterator[UserTurnRecord]:
        for t in range(1, self.cfg.turns + 1):
            turn = self._user_turn(conv, t)
            yield turn
            verdict = self._verdict(turn)
            if self.cfg.stop_on == "degenerate" and verdict.status == "ok" and not verdict.genuine:
                return  # an unparseable verdict says nothing, so the conversation goes on
            conv.messages = [*conv.messages, {"role": "user", "content": turn.user_turn.strip()}]
            if t < self.cfg.turns:
                self._reply(conv, t)

    # user turns -----------------------------------------------------------------------
    def _user_turn(self, conv: Conversation, t: int) -> UserTurnRecord:
        up = user_turn_prompt(
            self.w.template,
            conv.messages,
            self.w.markers,
            system_placement=self.cfg.system_placement,
            **self.w.kwargs,
        )
        params = self.w.user_params(self.temperature)
        n = max(1, self.cfg.best_of)
        seeds = tuple(
            derive_seed(self.cfg.seed, conv.item.id, "rollout", conv.sample, t, j) for j in range(n)
        )
        chooser = self._chooser_id() if n > 1 else None
        key = self.w.record_key(
            conv.item.dataset,
            up.prompt_sha,
            "rollout",
            params.key(),
            t,
            conv.sample,
            list(seeds),
            chooser,
            self.backend.decode_key,
        )
        if key in self.turns_done:
            self.stats.reused += 1
            return self.turns_done[key]
        res = self.backend.generate([GenRequest(up.prompt, "user", params, seeds)])[0]
        base = UserTurnRecord(
            key=key,
            answer_key=conv.answer_key,
            item_id=conv.item.id,
            model=self.backend.model_id,
            dataset=conv.item.dataset,
            config=self.w.config_id,
            temperature=self.temperature,
            sample=conv.sample,
            seed=seeds[0],
            perturbation=self.w.perturbations[0].id,
            messages=tuple(conv.messages),
            family=self.backend.family,
            probe="rollout",
            turn=t,
            prompt_sha=up.prompt_sha,
            template_sha=self.w.template.sha,
            content_survived=up.content_survived,
            removed=up.removed,
            prompt_tokens=res.prompt_tokens,
            prompt_tokens_reused=res.prompt_tokens_reused,
        )
        chosen, candidates = self._choose(base, res.completions, seeds)
        rec = replace(chosen, candidates=candidates if n > 1 else None)
        self.store.put_user_turn(rec)
        self.turns_done[key] = rec
        self.stats.generated += 1
        self.stats.model_calls += len(seeds)
        self.stats.count_tokens("user", res.prompt_tokens, res.prompt_tokens_reused)
        return rec

    def _chooser_id(self) -> str | None:
        return f"{self.steer.id}@{self.steer.version}" if self.steer else None

    def _choose(
        self, base: UserTurnRecord, completions: Any, seeds: tuple[int, ...]
    ) -> tuple[UserTurnRecord, tuple[dict[str, Any], ...]]:
        """The most genuine candidate (probability, then verdict, then seed order)."""
        recs = [
            replace(
                base,
                seed=seed,
                user_turn=c.text,
                user_finish=c.finish,
                user_tokens=c.completion_tokens,
                thinking_markup=has_thinking_markup(c.text),
            )
            for c, seed in zip(completions, seeds, strict=True)
        ]
        if len(recs) == 1 or self.steer is None:
            return recs[0], ()
        verdicts = self.steer.judge([judge_input(r) for r in recs])
        self.stats.judge_calls += sum(int(v.usage.get("calls", 0)) for v in verdicts)
        scores = [_score(v) for v in verdicts]
        best = max(range(len(recs)), key=lambda i: (scores[i], -i))
        cands = tuple(
            {
                "seed": r.seed,
                "text": r.user_turn,
                "genuine": v.genuine,
                "label": v.label,
                "probability": v.probability,
                "chosen": i == best,
            }
            for i, (r, v) in enumerate(zip(recs, verdicts, strict=True))
        )
        return recs[best], cands

    def _verdict(self, turn: UserTurnRecord) -> Judgment:
        """The steering judge's verdict on a turn, judged now if the store has none."""
        if self.steer is None:
            return Judgment("none", None, None, "no judge", status="error")
        judge = self.steer
        stored = [v for v in self.verdicts.get(turn.key, []) if v.judge == judge.id]
        if stored and stored[0].version == judge.version:
            return stored[0]
        (v,) = judge.judge([judge_input(turn)])
        v = replace(v, judge=judge.id, version=judge.version)
        self.store.put_judgment(turn.key, v)
        self.verdicts.setdefault(turn.key, []).append(v)
        self.stats.judged += 1
        self.stats.judge_calls += int(v.usage.get("calls", 0))
        return v

    # assistant replies ------------------------------------------------------------------
    def _reply(self, conv: Conversation, t: int) -> None:
        prompt = answer_prompt(
            self.w.template,
            conv.messages,
            system_placement=self.cfg.system_placement,
            markers=self.w.markers,
            **self.w.kwargs,
        )
        params = self.w.answer_params(derive_seed(self.cfg.seed, conv.item.id, "reply", t))
        key = self.w.record_key(
            conv.item.dataset, sha256(prompt), "rollout-answer", params.key(), params.seed
        )
        ans = self.answers.get(key) or self._generate_reply(conv, key, prompt, params)
        msg = history_message(ans.text, self.cfg.history_reasoning)
        conv.messages = [*conv.messages, msg]
        conv.answer_key = key

    def _generate_reply(
        self, conv: Conversation, key: str, prompt: str, params: Any
    ) -> AnswerRecord:
        res = self.backend.generate([GenRequest(prompt, "assistant", params, (params.seed,))])[0]
        comp = res.completions[0]
        parts = split_reasoning(comp.text, opened=self.w.markers.opens_reasoning)
        rec = AnswerRecord(
            key=key,
            item_id=conv.item.id,
            dataset=conv.item.dataset,
            model=self.backend.model_id,
            config=self.w.config_id,
            text=comp.text,
            final=parts.final,
            finish=answer_finish(comp.finish, parts),
            reasoning=parts.reasoning,
            completion_tokens=comp.completion_tokens,
            prompt_sha=sha256(prompt),
            template_sha=self.w.template.sha,
            prompt_tokens=res.prompt_tokens,
            prompt_tokens_reused=res.prompt_tokens_reused,
        )
        self.store.put_answer(rec)
        self.answers[key] = rec
        self.stats.answers_generated += 1
        self.stats.model_calls += 1
        self.stats.count_tokens("answer", res.prompt_tokens, res.prompt_tokens_reused)
        return rec


def _score(v: Judgment) -> float:
    """How genuine a verdict says a turn is: its probability, else 1/0 from σ."""
    if v.status != "ok":
        return -1.0
    if v.probability is not None:
        return v.probability
    return 1.0 if v.genuine else 0.0


def run_rollouts(
    cfg: RunConfig, out: Path, progress: driver.Progress | None = None
) -> driver.RunResult:
    """``userturn rollout``: every model plays ``cfg.turns`` user turns per conversation."""
    progress = progress or driver.NullProgress()
    driver.check_plan(cfg)
    judges = driver.load_judges(cfg)
    selector = _selector(cfg, judges)
    extra = [selector] if selector is not None and all(selector is not j for j in judges) else []
    try:
        for judge in [*judges, *extra]:
            judge.check_reachable()
        jobs = driver.load_jobs(cfg)
        with driver.run_directory(out, "rollout") as store:
            try:
                return _rollouts(cfg, out, store, jobs, judges, progress, selector)
            except KeyboardInterrupt:
                raise driver.interrupted(out, store) from None
    finally:
        for judge in [*judges, *extra]:
            judge.close()


def _selector(cfg: RunConfig, judges: list[Judge]) -> Judge | None:
    """``--select-judge`` (one of ``judges`` when it names one, else loaded apart), or the
    first judge; None without any judge."""
    if cfg.select_judge is None:
        return judges[0] if judges else None
    for spec, judge in zip(cfg.judges, judges, strict=True):
        if spec == cfg.select_judge:
            return judge
    return driver.load_judges(cfg.model_copy(update={"judges": [cfg.select_judge]}))[0]


def _rollouts(
    cfg: RunConfig,
    out: Path,
    store: Store,
    jobs: list[Any],
    judges: list[Judge],
    progress: driver.Progress,
    selector: Judge | None = None,
) -> driver.RunResult:
    today = cfg.frozen_date or dt.date.today().isoformat()
    date = dt.date.fromisoformat(store.set_meta_default("frozen_date", today))
    config_id = driver.register_config(store, cfg, date.isoformat())
    driver.register_items(store, jobs)
    steer = selector or (judges[0] if judges else None)
    stats = driver.RunStats()
    turns: list[UserTurnRecord] = []
    described = []
    for model in cfg.models:
        backend = load_backend(model, defaults={"base_url": cfg.base_url})
        try:
            worker = ItemWorker(backend, cfg, date, config_id)
            described.append(worker.describe())
            turns += _model_rollouts(worker, store, jobs, judges, stats, progress, steer)
        finally:
            backend.close()
    rest = [j for j in judges if j is not steer]
    tally = judge_rows(store, rest, turns) if rest else JudgeTally()
    return driver.finish_run(cfg, out, store, jobs, date, config_id, stats, described, tally)


def _model_rollouts(
    worker: ItemWorker,
    store: Store,
    jobs: list[Any],
    judges: list[Judge],
    stats: driver.RunStats,
    progress: driver.Progress,
    selector: Judge | None = None,
) -> list[UserTurnRecord]:
    roller = Roller(worker, store, judges, stats, selector)
    known = dict(roller.answers)
    name = f"conversations {worker.backend.model_id}"
    progress.stage(name, sum(len(j.items) for j in jobs))
    turns: list[UserTurnRecord] = []
    for job in jobs:
        for item in job.items:
            for ev in worker.answers([item], job.dataset, known):
                driver.on_answer(ev, store, known, stats)
                turns += list(roller.roll(ev))
            progress.advance(name)
    return turns
