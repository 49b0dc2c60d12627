"""The likelihood probe's stage for one model: build each context's conditions, score
them in one batch, and hand back records (the worker calls this; it stores nothing).

A version 2 record scores its candidates under several prompts (``likelihood_plan``):
the real context under the user header, each counterfactual answer under the user
header, and the real context under the assistant header. All prompts are rendered by the
model's own template through the same path as the generation probe's prompt.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any, Protocol

from userturn.backends import Backend
from userturn.chat import UserPrompt, user_turn_prompt
from userturn.chat.markers import TurnMarkers
from userturn.chat.template import ChatTemplate
from userturn.config import RunConfig
from userturn.perturb import Perturbation
from userturn.run.events import AnswerEvent, LikelihoodEvent
from userturn.run.likelihood import candidates, conditioned, filled, score_requests, unrelated_item
from userturn.run.likelihood_plan import (
    assistant_turn_prompt,
    copies_context,
    counterfactuals,
    with_answer,
)
from userturn.rundir.records import (
    CANDIDATES_VERSION,
    AnswerRecord,
    Counterfactual,
    LikelihoodRecord,
)
from userturn.types import Item, Message, PerturbationDetail, ScoreRequest


class ScoringWorker(Protocol):
    """What this stage reads from the worker (``run.worker.ItemWorker``), named here so
    that the stage does not import the worker that calls it."""

    backend: Backend
    cfg: RunConfig
    config_id: str
    kwargs: dict[str, Any]
    template: ChatTemplate
    markers: TurnMarkers
    perturbations: list[Perturbation]

    def user_context(
        self, item: Item, answer: AnswerRecord, pert: Perturbation
    ) -> tuple[list[Message], PerturbationDetail | None]: ...

    def record_key(self, dataset: str, prompt_sha: str, stage: str, *parts: Any) -> str: ...


EXCLUDED_COPY = "the reference turn equals a turn of the context"


def likelihood_events(
    worker: ScoringWorker, answers: list[AnswerEvent], pool: list[Item], done: set[str]
) -> Iterator[LikelihoodEvent]:
    """Score each context's candidates under every condition (no sampling)."""
    plan: list[tuple[list[ScoreRequest], LikelihoodRecord]] = []
    for ev in answers:
        for pert in worker.perturbations:
            built = _planned(worker, ev, pert, pool)
            if built is None:
                continue
            reqs, rec = built
            if rec.key in done:
                yield LikelihoodEvent(rec, generated=False)
            elif rec.excluded:
                yield LikelihoodEvent(rec, generated=True)
            else:
                plan.append((reqs, rec))
    flat = [r for reqs, _ in plan for r in reqs]
    results = worker.backend.loglikelihood(flat) if flat else []
    at = 0
    for reqs, rec in plan:
        mine = results[at : at + len(reqs)]
        at += len(reqs)
        yield LikelihoodEvent(
            replace(
                rec,
                candidates=filled(rec.candidates, mine),
                prompt_tokens=sum(r.prompt_tokens for r in mine),
                prompt_tokens_reused=sum(r.prompt_tokens_reused for r in mine),
            ),
            generated=True,
        )


def _planned(
    worker: ScoringWorker, ev: AnswerEvent, pert: Perturbation, pool: list[Item]
) -> tuple[list[ScoreRequest], LikelihoodRecord] | None:
    """A context's requests and its unscored record; None when it has no real turn."""
    ctx, _ = worker.user_context(ev.item, ev.record, pert)
    cands = candidates(ev.item, ctx, pool)
    if not cands:
        return None
    up = _user_prompt(worker, ctx)
    if copies_context(cands[0][1], ctx):
        rec = _record(worker, ev, pert, ctx, up.prompt_sha, [], ())
        return [], replace(rec, excluded=EXCLUDED_COPY)
    source = unrelated_item(ev.item, pool)
    avoid = frozenset({source.id} if source is not None else ())
    cfs = counterfactuals(ev.item, str(ctx[-1]["content"]), pool, avoid)
    prompts = {"user": up.prompt}
    for i, cf in enumerate(cfs):
        prompts[f"cf{i}"] = _user_prompt(worker, with_answer(ctx, cf.text)).prompt
    asst = assistant_turn_prompt(
        worker.template,
        ctx,
        worker.markers,
        up.prompt,
        system_placement=worker.cfg.system_placement,
        **worker.kwargs,
    )
    if asst is not None:
        prompts["assistant"] = asst
    scored = conditioned(cands, len(cfs), assistant=asst is not None)
    reqs = score_requests(scored, prompts, worker.markers.user_end)
    keyed = [(r.prompt, list(r.continuations)) for r in reqs]
    rec = _record(worker, ev, pert, ctx, up.prompt_sha, keyed, cfs)
    return reqs, replace(rec, candidates=scored)


def _user_prompt(worker: ScoringWorker, ctx: list[Message]) -> UserPrompt:
    return user_turn_prompt(
        worker.template,
        ctx,
        worker.markers,
        system_placement=worker.cfg.system_placement,
        **worker.kwargs,
    )


def _record(
    worker: ScoringWorker,
    ev: AnswerEvent,
    pert: Perturbation,
    ctx: list[Message],
    prompt_sha: str,
    keyed: list[tuple[str, list[str]]],
    cfs: tuple[Counterfactual, ...],
) -> LikelihoodRecord:
    """The record before scoring: keyed by every prompt and its exact continuations."""
    key = worker.record_key(
        ev.item.dataset, prompt_sha, "likelihood", CANDIDATES_VERSION, keyed, pert.id
    )
    return LikelihoodRecord(
        key=key,
        answer_key=ev.record.key,
        item_id=ev.item.id,
        model=worker.backend.model_id,
        dataset=ev.item.dataset,
        config=worker.config_id,
        perturbation=pert.id,
        messages=tuple(ctx),
        candidates=(),
        family=worker.backend.family,
        prompt_sha=prompt_sha,
        template_sha=worker.template.sha,
        counterfactuals=cfs,
    )
