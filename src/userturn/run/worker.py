"""What every probe does with one model: answer → score → perturb → user turn.

``ItemWorker`` holds one backend and the model's template; the probes' stages
(``run.probes``) build on it. It reads nothing from and writes nothing to the store (the
driver passes in what is already known and stores what comes out), so the same code
runs in-process or on a Ray worker.
Every record's key is a content hash of what produced it, looked up before any model
call: a finished run re-runs with zero calls, and a killed one resumes where it stopped.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from userturn.backends import Backend
from userturn.backends.base import TemplateOptions
from userturn.chat import (
    ChatTemplate,
    TurnMarkers,
    UserPrompt,
    answer_finish,
    answer_prompt,
    derive_markers,
    has_thinking_markup,
    history_message,
    sha256,
    split_reasoning,
    user_turn_prompt,
)
from userturn.config import RunConfig
from userturn.datasets import Dataset
from userturn.errors import UserError
from userturn.perturb import Perturbation, load_perturbation
from userturn.run.events import AnswerEvent, UserEvent
from userturn.rundir.keys import content_key, derive_seed
from userturn.rundir.records import AnswerRecord, UserTurnRecord
from userturn.types import GenRequest, GenResult, Item, Message, PerturbationDetail, SamplingParams

log = logging.getLogger(__name__)


def samples_at(temperature: float, k: int) -> int:
    """One sample per context at T=0: k copies of a greedy output are not k samples."""
    return 1 if temperature == 0 else k


def check_capabilities(backend: Backend, cfg: RunConfig) -> None:
    """Fail at startup for a backend that can't do what the run asks, and never swap roles:
    the user turn must be a raw continuation of the rendered prompt."""
    caps = backend.capabilities
    if not caps.raw_completion:
        raise UserError(
            f"{backend.model_id} cannot write a user turn: it offers no raw completion of a "
            "rendered prompt (a chat endpoint only writes assistant turns)",
            field="model",
        )
    if cfg.samples > 1 and any(t > 0 for t in cfg.temperatures) and not caps.seeds:
        log.warning(
            "%s does not honour seeds: its k samples are not reproducible", backend.model_id
        )


def _no_final(dataset: Dataset) -> dict[str, Any] | None:
    """The score of an answer cut inside its reasoning: incorrect, since it never gave a
    final answer (an empty text could otherwise pass checks such as "use no commas")."""
    if not dataset.scored:
        return None
    return {"correct": False, "reason": "length_in_reasoning: no final answer"}


class ItemWorker:
    """Generation stages for one model over chunks of items (in-process or on Ray)."""

    def __init__(self, backend: Backend, cfg: RunConfig, date: dt.date, config_id: str) -> None:
        check_capabilities(backend, cfg)
        self.backend = backend
        self.cfg = cfg
        self.config_id = config_id
        self.kwargs: dict[str, Any] = dict(cfg.chat_template_kwargs)
        self.template: ChatTemplate = backend.template(
            TemplateOptions(
                date=date, path=cfg.chat_template, bos_token=cfg.bos_token, eos_token=cfg.eos_token
            )
        )
        self.markers: TurnMarkers = derive_markers(self.template, **self.kwargs)
        self.perturbations: list[Perturbation] = [load_perturbation(p) for p in cfg.perturbations]

    def describe(self) -> dict[str, Any]:
        """The model as the manifest records it: backend, template and derived markers."""
        return {
            **self.backend.describe(),
            "template_sha": self.template.sha,
            "template_source": self.template.name,
            "template_preamble": self.markers.preamble,
            "user_header": self.markers.user_header,
            "user_stops": list(self.markers.user_stops(self.template)),
            "assistant_header": self.markers.assistant_header,
            "template_trailer": self.markers.trailer,
            "opens_reasoning": self.markers.opens_reasoning,
            "system_placement": self.cfg.system_placement,
            "system_in_new_turn": self.markers.system_in_new_turn,
            "batch_items": max(1, self.backend.batch_items),
        }

    # answers --------------------------------------------------------------------------
    def context_messages(self, item: Item) -> list[Message]:
        msgs = [dict(m) for m in item.messages]
        if self.cfg.system_prompt and msgs[0]["role"] != "system":
            msgs.insert(0, {"role": "system", "content": self.cfg.system_prompt})
        return msgs

    def answer_params(self, seed: int) -> SamplingParams:
        return SamplingParams(
            temperature=self.cfg.answer_temperature,
            top_p=self.cfg.top_p,
            top_k=self.cfg.top_k,
            max_tokens=self.cfg.max_answer_tokens,
            stop=self.markers.answer_stops(self.template),
            seed=seed,
        )

    def _given(self, item: Item) -> AnswerRecord:
        """A held-out item's assistant turn, as given by the dataset (never scored)."""
        text = str(item.messages[-1]["content"])
        parts = split_reasoning(text)
        key = content_key(self.config_id, "given", item.dataset, item.id, sha256(text))
        return AnswerRecord(
            key=key,
            item_id=item.id,
            dataset=item.dataset,
            model="",
            config=self.config_id,
            text=text,
            final=parts.final,
            finish="given",
            reasoning=parts.reasoning,
        )

    def answers(
        self, items: list[Item], dataset: Dataset, known: dict[str, AnswerRecord]
    ) -> Iterator[AnswerEvent]:
        todo: list[tuple[Item, str, str, SamplingParams]] = []
        for item in items:
            if item.held_out:
                given = self._given(item)
                yield AnswerEvent(known.get(given.key, given), item, generated=False)
                continue
            prompt = answer_prompt(
                self.template,
                self.context_messages(item),
                system_placement=self.cfg.system_placement,
                markers=self.markers,
                **self.kwargs,
            )
            params = self.answer_params(derive_seed(self.cfg.seed, item.id, "answer"))
            key = self.record_key(item.dataset, sha256(prompt), "answer", params.key(), params.seed)
            if key in known:
                yield AnswerEvent(known[key], item, generated=False)
            else:
                todo.append((item, key, prompt, params))
        if not todo:
            return
        reqs = [
            GenRequest(prompt=p, role="assistant", params=pa, seeds=(pa.seed,))
            for _, _, p, pa in todo
        ]
        results = self._generate(reqs, [item for item, *_ in todo])
        for (item, key, prompt, _), res in zip(todo, results, strict=True):
            yield AnswerEvent(self.completed_answer(item, key, prompt, res, dataset), item, True)

    def completed_answer(
        self, item: Item, key: str, prompt: str, res: GenResult, dataset: Dataset | None = None
    ) -> AnswerRecord:
        """The record of an assistant turn this model wrote (``res``'s first completion
        of ``prompt``), for the probe's answers and a rollout's replies alike, so the two
        never drift apart in what they keep. ``dataset`` scores it (an answer cut inside
        its reasoning scores as wrong) and keeps the item's gold data for rescoring; a
        rollout's later replies are not scored (None)."""
        comp = res.completions[0]
        parts = split_reasoning(comp.text, opened=self.markers.opens_reasoning)
        score = None
        if dataset is not None:
            score = dataset.score(item, parts.final) if parts.complete else _no_final(dataset)
        return AnswerRecord(
            key=key,
            item_id=item.id,
            dataset=item.dataset,
            model=self.backend.model_id,
            config=self.config_id,
            text=comp.text,
            final=parts.final,
            finish=answer_finish(comp.finish, parts),
            reasoning=parts.reasoning,
            completion_tokens=comp.completion_tokens,
            prompt_sha=sha256(prompt),
            template_sha=self.template.sha,
            prompt_tokens=res.prompt_tokens,
            prompt_tokens_reused=res.prompt_tokens_reused,
            correct=None if score is None else score.get("correct"),
            score=score,
            reference=None if dataset is None else item.reference,
        )

    def record_key(self, dataset: str, prompt_sha: str, stage: str, *parts: Any) -> str:
        """What produced a record: config, dataset, model, template, prompt, stage, params."""
        return content_key(
            self.config_id,
            dataset,
            self.backend.model_id,
            self.backend.revision,
            self.template.sha,
            prompt_sha,
            stage,
            *parts,
        )

    # user turns -----------------------------------------------------------------------
    def user_context(
        self, item: Item, answer: AnswerRecord, pert: Perturbation
    ) -> tuple[list[Message], PerturbationDetail | None]:
        """The context the user stage sees: the item's messages and the (perturbed)
        answer, plus what the perturbation changed when the text alone doesn't say."""
        base = self.context_messages(item)
        if item.held_out:
            base = base[:-1]
        opened = self.markers.opens_reasoning and answer.finish != "given"
        msg = history_message(answer.text, self.cfg.history_reasoning, opened=opened)
        seed = derive_seed(self.cfg.seed, item.id, pert.id)
        done = pert.perturb(str(msg["content"]), item, seed)
        msg["content"] = done.text
        if done.detail and "reasoning_content" in msg:
            msg["reasoning_content"] = pert.rewrite(
                str(msg["reasoning_content"]), item, done.detail
            )
        return [*base, msg], done.detail

    def user_params(self, temperature: float) -> SamplingParams:
        return SamplingParams(
            temperature=temperature,
            top_p=self.cfg.top_p,
            top_k=self.cfg.top_k,
            max_tokens=self.cfg.max_user_tokens,
            stop=self.markers.user_stops(self.template),
        )

    def user_turns(self, answers: list[AnswerEvent], done: set[str]) -> Iterator[UserEvent]:
        plan: list[tuple[GenRequest, list[UserTurnRecord]]] = []
        for ev in answers:
            for pert in self.perturbations:
                ctx, detail = self.user_context(ev.item, ev.record, pert)
                up = user_turn_prompt(
                    self.template,
                    ctx,
                    self.markers,
                    system_placement=self.cfg.system_placement,
                    **self.kwargs,
                )
                for temp in self.cfg.temperatures:
                    planned = self.plan_turns(ev, pert, ctx, up, temp, detail)
                    yield from (UserEvent(r, generated=False) for r in planned if r.key in done)
                    missing = [r for r in planned if r.key not in done]
                    if missing:
                        seeds = tuple(r.seed for r in missing)
                        req = GenRequest(up.prompt, "user", self.user_params(temp), seeds)
                        plan.append((req, missing))
        if plan:
            yield from self._generate_turns(plan)

    def _generate(self, reqs: list[GenRequest], items: list[Item]) -> list[GenResult]:
        """The backend's results; a request it refuses (e.g. a prompt longer than the
        context window) is reported with the items it came from."""
        try:
            return self.backend.generate(reqs)
        except UserError as exc:
            ids = ", ".join(dict.fromkeys(f"{it.dataset}/{it.id}" for it in items))
            raise UserError(f"{ids}: {exc.message}", field=exc.field) from exc

    def _generate_turns(
        self, plan: list[tuple[GenRequest, list[UserTurnRecord]]]
    ) -> Iterator[UserEvent]:
        items = [Item(t.item_id, t.dataset, ()) for _, turns in plan for t in turns]
        results = self._generate([req for req, _ in plan], items)
        for (_, turns), res in zip(plan, results, strict=True):
            n = max(len(turns), 1)
            for turn, comp in zip(turns, res.completions, strict=True):
                rec = replace(
                    turn,
                    user_turn=comp.text,
                    user_finish=comp.finish,
                    user_tokens=comp.completion_tokens,
                    thinking_markup=has_thinking_markup(comp.text),
                    prompt_tokens=res.prompt_tokens // n,
                    prompt_tokens_reused=res.prompt_tokens_reused // n,
                )
                yield UserEvent(rec, generated=True)

    def plan_turns(
        self,
        ev: AnswerEvent,
        pert: Perturbation,
        ctx: list[Message],
        up: UserPrompt,
        temp: float,
        detail: PerturbationDetail | None = None,
    ) -> list[UserTurnRecord]:
        """The user-turn records this context needs at ``temp``: keys and seeds, no text."""
        params = self.user_params(temp)
        out = []
        for i in range(samples_at(temp, self.cfg.samples)):
            seed = derive_seed(self.cfg.seed, ev.item.id, temp, i)
            key = self.record_key(
                ev.item.dataset,
                up.prompt_sha,
                "user",
                params.key(),
                i,
                seed,
                pert.id,
                self.backend.decode_key,
            )
            out.append(
                UserTurnRecord(
                    key=key,
                    answer_key=ev.record.key,
                    item_id=ev.item.id,
                    model=self.backend.model_id,
                    dataset=ev.item.dataset,
                    config=self.config_id,
                    temperature=temp,
                    sample=i,
                    seed=seed,
                    perturbation=pert.id,
                    messages=tuple(ctx),
                    family=self.backend.family,
                    perturbation_version=pert.version,
                    perturbation_detail=detail,
                    prompt_sha=up.prompt_sha,
                    template_sha=self.template.sha,
                    content_survived=up.content_survived,
                    removed=up.removed,
                    reference_turn=ev.item.reference_turn,
                )
            )
        return out
