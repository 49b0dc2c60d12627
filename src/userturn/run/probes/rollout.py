"""Rollouts (``userturn rollout``): the same weights play both sides for N user turns.

Starting from each item, the model answers as the assistant, writes the next user turn
under its own user header, answers that, and so on, for ``turns`` user turns. Every
prompt is rendered by the probe's template code from the conversation so far, so each
step extends the previous prompt and llama.cpp reuses its KV prefix. Every user turn is
judged as it is written by the steering judge (``--select-judge``, else the first judge),
which decides ``--stop-on degenerate`` and the best-of-N choice; the driver runs every
other judge over the turns afterwards. Best-of-N needs a judge other than the selector to
score the kept turns: the selector's own verdicts on turns it picked are biased upward.

Best-of-N: at each step N candidate user turns are sampled (decoded together where the
backend batches samples), all are judged, and the most genuine is kept: highest
probability of genuine (the offline judge gives one), else a genuine verdict, ties to
the lowest seed. All candidates are recorded on the kept turn.

The stage runs where the worker runs (in-process or on a Ray actor, which loads its own
steering judge) and yields every step as an event: replies, turns and steering verdicts,
which the driver stores as they come. Resume: every step's key is a content hash of its
rendered prompt (so of the whole conversation before it), the sampling, the sample and
turn, the seeds and, for best-of, the choosing judge, so a rollout killed in the middle
of turn 3 resumes there, taking turns 1-2 from the store.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from userturn.chat import (
    answer_prompt,
    has_thinking_markup,
    history_message,
    sha256,
    user_turn_prompt,
)
from userturn.config import RunConfig
from userturn.datasets import Dataset
from userturn.errors import UserError
from userturn.judges import Judge, load_judge
from userturn.run.events import AnswerEvent, Event, JudgmentEvent, UserEvent
from userturn.run.judge_stage import judge_input
from userturn.run.probes.base import Known, ProbeBase
from userturn.run.worker import samples_at
from userturn.rundir.keys import derive_seed
from userturn.rundir.records import AnswerRecord, UserTurnRecord
from userturn.rundir.store import Store
from userturn.types import GenRequest, Item, Judgment, Message
from userturn.types import Probe as ProbeName

if TYPE_CHECKING:
    from userturn.run.probes.base import Job
    from userturn.run.worker import ItemWorker

log = logging.getLogger(__name__)


class RolloutProbe(ProbeBase):
    name: ClassVar[ProbeName] = "rollout"
    command: ClassVar[str] = "rollout"
    unit: ClassVar[str] = "user turns"
    estimates_speed: ClassVar[bool] = False

    def check(self) -> None:
        """A rollout plays one user temperature and one perturbation; a grid over either
        is several rollout runs, and silently taking the first would mislabel the cells."""
        cfg = self.cfg
        if len(cfg.temperatures) != 1:
            raise UserError(
                "rollouts take one user temperature (--user-temperature T), got "
                f"{cfg.temperatures}",
                field="temperatures",
            )
        if len(cfg.perturbations) != 1:
            raise UserError("rollouts take one perturbation", field="perturbations")
        if cfg.best_of > 1 and cfg.temperatures[0] == 0:
            raise UserError(
                "--best-of needs a user temperature > 0: greedy candidates are all the same",
                field="best_of",
            )
        if cfg.best_of > 1:
            chooser = cfg.select_judge or (cfg.judges[0] if cfg.judges else None)
            if chooser is None or not [j for j in cfg.judges if j != chooser]:
                raise UserError(
                    f"--best-of turns chosen by judge {chooser!r} cannot be scored by it (a "
                    "selected turn looks genuine to its selector, true or not): give a "
                    "second --judge to score them (the first chooses), or --select-judge "
                    "SPEC naming another judge to choose",
                    field="best_of",
                )

    def planned(self, jobs: list[Job]) -> int:
        """Every turn of every conversation (an early stop plays fewer)."""
        per_item = samples_at(self.cfg.temperatures[0], self.cfg.samples) * self.cfg.turns
        return sum(len(j.items) for j in jobs) * per_item

    def known(self, store: Store) -> Known:
        base = super().known(store)
        base.turns = {t.key: t for t in store.user_turns(probe="rollout")}
        base.verdicts = store.judgments()
        return base

    def stage(self, worker: ItemWorker) -> RolloutStage:
        return RolloutStage(worker, steering_judge(self.cfg))

    def judged_after(self, judges: list[Judge]) -> list[Judge]:
        """Every judge but the steering one, which judged each turn as it was written."""
        steer = steering_index(self.cfg)
        return [j for i, j in enumerate(judges) if i != steer]

    def judges_reference(self) -> bool:
        return False


def steering_index(cfg: RunConfig) -> int | None:
    """Which of ``cfg.judges`` steers: the one ``--select-judge`` names, else the first;
    None when it names a judge outside ``cfg.judges`` (or there is no judge)."""
    if cfg.select_judge is None:
        return 0 if cfg.judges else None
    return cfg.judges.index(cfg.select_judge) if cfg.select_judge in cfg.judges else None


def steering_judge(cfg: RunConfig) -> Judge | None:
    """The steering judge, loaded where the conversations are played."""
    spec = cfg.select_judge or (cfg.judges[0] if cfg.judges else None)
    if spec is None:
        return None
    judge = load_judge(spec, base_url=cfg.judge_base_url, models=cfg.models)
    judge.check_reachable()
    return judge


@dataclass
class Conversation:
    """One rollout in progress: the messages so far and the key of the last answer."""

    item: Item
    sample: int
    messages: list[Message]
    answer_key: str


class RolloutStage:
    """Plays the conversations of one model, item by item; every step is an event."""

    def __init__(self, worker: ItemWorker, steer: Judge | None) -> None:
        self.w = worker
        self.steer = steer
        """The judge that judges each turn as it is written: it chooses best-of
        candidates and decides ``stop_on``."""
        self.cfg = worker.cfg
        self.temperature = self.cfg.temperatures[0]

    def close(self) -> None:
        if self.steer is not None:
            self.steer.close()

    def process(
        self, items: list[Item], dataset: Dataset, known: Known, pool: list[Item]
    ) -> Iterator[Event]:
        """One item at a time: its first answer, then its k conversations."""
        for item in items:
            for ev in self.w.answers([item], dataset, known.answers):
                yield ev
                yield from self.roll(ev, known)

    def roll(self, start: AnswerEvent, known: Known) -> Iterator[Event]:
        """Every conversation (k samples) from one item's first answer."""
        for s in range(samples_at(self.temperature, self.cfg.samples)):
            ctx, _ = self.w.user_context(start.item, start.record, self.w.perturbations[0])
            conv = Conversation(start.item, s, ctx, start.record.key)
            yield from self._play(conv, known)

    def _play(self, conv: Conversation, known: Known) -> Iterator[Event]:
        for t in range(1, self.cfg.turns + 1):
            ev = self._user_turn(conv, t, known)
            yield ev
            turn = ev.record
            verdict, new = self._verdict(turn, known)
            if new is not None:
                yield new
            if self.cfg.stop_on == "degenerate" and verdict.status == "ok" and not verdict.genuine:
                return  # an unparseable verdict says nothing, so the conversation goes on
            conv.messages = [*conv.messages, {"role": "user", "content": turn.user_turn.strip()}]
            if t < self.cfg.turns:
                reply = self._reply(conv, t, known)
                if reply is not None:
                    yield reply

    # user turns -----------------------------------------------------------------------
    def _user_turn(self, conv: Conversation, t: int, known: Known) -> UserEvent:
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
        backend = self.w.backend
        key = self.w.record_key(
            conv.item.dataset,
            up.prompt_sha,
            "rollout",
            params.key(),
            t,
            conv.sample,
            list(seeds),
            chooser,
            backend.decode_key,
        )
        if key in known.turns:
            return UserEvent(known.turns[key], generated=False)
        res = backend.generate([GenRequest(up.prompt, "user", params, seeds)])[0]
        base = UserTurnRecord(
            key=key,
            answer_key=conv.answer_key,
            item_id=conv.item.id,
            model=backend.model_id,
            dataset=conv.item.dataset,
            config=self.w.config_id,
            temperature=self.temperature,
            sample=conv.sample,
            seed=seeds[0],
            perturbation=self.w.perturbations[0].id,
            messages=tuple(conv.messages),
            family=backend.family,
            probe="rollout",
            turn=t,
            prompt_sha=up.prompt_sha,
            template_sha=self.w.template.sha,
            content_survived=up.content_survived,
            removed=up.removed,
            prompt_tokens=res.prompt_tokens,
            prompt_tokens_reused=res.prompt_tokens_reused,
        )
        chosen, candidates, judge_calls = self._choose(base, res.completions, seeds)
        rec = replace(chosen, candidates=candidates if n > 1 else None)
        known.turns[key] = rec
        return UserEvent(rec, generated=True, calls=len(seeds), judge_calls=judge_calls)

    def _chooser_id(self) -> str | None:
        return f"{self.steer.id}@{self.steer.version}" if self.steer else None

    def _choose(
        self, base: UserTurnRecord, completions: Any, seeds: tuple[int, ...]
    ) -> tuple[UserTurnRecord, tuple[dict[str, Any], ...], int]:
        """The most genuine candidate (probability, then verdict, then seed order), the
        candidates as recorded, and the judge calls spent choosing."""
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
            return recs[0], (), 0
        verdicts = self.steer.judge([judge_input(r) for r in recs])
        calls = sum(int(v.usage.get("calls", 0)) for v in verdicts)
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
        return recs[best], cands, calls

    def _verdict(self, turn: UserTurnRecord, known: Known) -> tuple[Judgment, JudgmentEvent | None]:
        """The steering judge's verdict on a turn, and the event that stores it when it
        was judged now (the store had none)."""
        if self.steer is None:
            return Judgment("none", None, None, "no judge", status="error"), None
        judge = self.steer
        stored = [v for v in known.verdicts.get(turn.key, []) if v.judge == judge.id]
        if stored and stored[0].version == judge.version:
            return stored[0], None
        (v,) = judge.judge([judge_input(turn)])
        v = replace(v, judge=judge.id, version=judge.version)
        known.verdicts.setdefault(turn.key, []).append(v)
        return v, JudgmentEvent(turn.key, v)

    # assistant replies ------------------------------------------------------------------
    def _reply(self, conv: Conversation, t: int, known: Known) -> AnswerEvent | None:
        """Extend the conversation by the assistant's reply; the event of a new one."""
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
        ans = known.answers.get(key)
        event = None
        if ans is None:
            ans = self._generate_reply(conv, key, prompt, params)
            known.answers[key] = ans
            event = AnswerEvent(ans, conv.item, generated=True, reply=True)
        msg = history_message(ans.text, self.cfg.history_reasoning)
        conv.messages = [*conv.messages, msg]
        conv.answer_key = key
        return event

    def _generate_reply(
        self, conv: Conversation, key: str, prompt: str, params: Any
    ) -> AnswerRecord:
        req = GenRequest(prompt, "assistant", params, (params.seed,))
        res = self.w.backend.generate([req])[0]
        return self.w.completed_answer(conv.item, key, prompt, res)


def _score(v: Judgment) -> float:
    """How genuine a verdict says a turn is: its probability, else 1/0 from σ."""
    if v.status != "ok":
        return -1.0
    if v.probability is not None:
        return v.probability
    return 1.0 if v.genuine else 0.0
