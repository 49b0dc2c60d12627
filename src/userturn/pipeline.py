"""The probe as stages: answer → score → perturb → user turn → judge.

``ItemWorker`` holds one backend and does the generation stages for a chunk of items; it
reads nothing from and writes nothing to the store, so the same code runs in-process or
on a Ray worker, and only the driver (``run``) owns the store. Every record's key is a
content hash of what produced it, looked up before any model call: a finished run
re-runs with zero calls, and a killed one resumes where it stopped.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from userturn.backends import Backend
from userturn.backends.base import TemplateOptions
from userturn.chat import (
    ChatTemplate,
    TurnMarkers,
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
from userturn.perturb import Perturbation, load_perturbation
from userturn.store import UserTurnRow, content_key
from userturn.types import GenRequest, Item, Message, SamplingParams

log = logging.getLogger(__name__)


def derive_seed(run_seed: int, *parts: object) -> int:
    """seed = hash(run seed, item, T, sample index): stable across runs and executors."""
    blob = "\x1f".join(str(p) for p in (run_seed, *parts)).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:4], "big") & 0x7FFFFFFF


def samples_at(temperature: float, k: int) -> int:
    """One sample per context at T=0: k copies of a greedy output are not k samples."""
    return 1 if temperature == 0 else k


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
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "extra"}
        return {**out, **self.extra}


@dataclass(frozen=True)
class AnswerEvent:
    key: str
    item: Item
    data: dict[str, Any]
    generated: bool


@dataclass(frozen=True)
class UserEvent:
    row: UserTurnRow
    generated: bool


Event = AnswerEvent | UserEvent


def template_kwargs(cfg: RunConfig) -> dict[str, Any]:
    return dict(cfg.chat_template_kwargs)


class ItemWorker:
    """Generation stages for one model over chunks of items (in-process or on Ray)."""

    def __init__(self, backend: Backend, cfg: RunConfig, date: dt.date) -> None:
        self.backend = backend
        self.cfg = cfg
        self.kwargs = template_kwargs(cfg)
        self.template: ChatTemplate = backend.template(
            TemplateOptions(
                date=date, path=cfg.chat_template, bos_token=cfg.bos_token, eos_token=cfg.eos_token
            )
        )
        self.markers: TurnMarkers = derive_markers(self.template, **self.kwargs)
        self.perturbations: list[Perturbation] = [load_perturbation(p) for p in cfg.perturbations]

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

    def answer_key(self, item: Item) -> tuple[str, str | None, SamplingParams | None]:
        """(key, prompt or None for held-out, params)."""
        if item.held_out:
            given = str(item.messages[-1]["content"])
            return content_key("given", item.dataset, item.id, sha256(given)), None, None
        prompt = answer_prompt(self.template, self.context_messages(item), **self.kwargs)
        params = self.answer_params(derive_seed(self.cfg.seed, item.id, "answer"))
        key = content_key(
            self.backend.model_id,
            self.backend.revision,
            self.template.sha,
            sha256(prompt),
            "answer",
            params.key(),
            params.seed,
        )
        return key, prompt, params

    def answers(
        self, items: list[Item], dataset: Dataset, known: dict[str, dict[str, Any]]
    ) -> Iterator[AnswerEvent]:
        todo: list[tuple[Item, str, str, SamplingParams]] = []
        for item in items:
            key, prompt, params = self.answer_key(item)
            if key in known:
                yield AnswerEvent(key, item, known[key], generated=False)
            elif prompt is None:
                yield AnswerEvent(key, item, self._given(item), generated=False)
            else:
                assert params is not None
                todo.append((item, key, prompt, params))
        if not todo:
            return
        reqs = [
            GenRequest(prompt=p, role="assistant", params=pa, seeds=(pa.seed,))
            for _, _, p, pa in todo
        ]
        for (item, key, prompt, _), res in zip(todo, self.backend.generate(reqs), strict=True):
            comp = res.completions[0]
            parts = split_reasoning(comp.text)
            score = dataset.score(item, parts.final)
            yield AnswerEvent(
                key,
                item,
                {
                    "model": self.backend.model_id,
                    "text": comp.text,
                    "reasoning": parts.reasoning,
                    "final": parts.final,
                    "finish": comp.finish,
                    "completion_tokens": comp.completion_tokens,
                    "prompt_sha": sha256(prompt),
                    "template_sha": self.template.sha,
                    "prompt_tokens": res.prompt_tokens,
                    "prompt_tokens_reused": res.prompt_tokens_reused,
                    "correct": None if score is None else score.get("correct"),
                    "score": score,
                },
                generated=True,
            )

    @staticmethod
    def _given(item: Item) -> dict[str, Any]:
        text = str(item.messages[-1]["content"])
        parts = split_reasoning(text)
        return {
            "text": text,
            "reasoning": parts.reasoning,
            "final": parts.final,
            "finish": "given",
            "correct": None,
            "score": None,
        }

    # user turns -----------------------------------------------------------------------
    def user_context(self, item: Item, answer: dict[str, Any], pert: Perturbation) -> list[Message]:
        base = self.context_messages(item)
        if item.held_out:
            base = base[:-1]
        msg = history_message(str(answer["text"]), self.cfg.history_reasoning)
        msg["content"] = pert.apply(str(msg["content"]))
        return [*base, msg]

    def user_params(self, temperature: float) -> SamplingParams:
        return SamplingParams(
            temperature=temperature,
            top_p=self.cfg.top_p,
            top_k=self.cfg.top_k,
            max_tokens=self.cfg.max_user_tokens,
            stop=self.markers.user_stops(self.template),
        )

    def user_turns(self, answers: list[AnswerEvent], done: set[str]) -> Iterator[UserEvent]:
        plan: list[tuple[GenRequest, list[UserTurnRow]]] = []
        for ev in answers:
            for pert in self.perturbations:
                ctx = self.user_context(ev.item, ev.data, pert)
                up = user_turn_prompt(self.template, ctx, self.markers, **self.kwargs)
                for temp in self.cfg.temperatures:
                    rows = self._plan_rows(ev, pert, ctx, up, temp)
                    for row in rows:
                        if row.key in done:
                            yield UserEvent(row, generated=False)
                    missing = [r for r in rows if r.key not in done]
                    if missing:
                        req = GenRequest(
                            prompt=up.prompt,
                            role="user",
                            params=self.user_params(temp),
                            seeds=tuple(r.seed for r in missing),
                        )
                        plan.append((req, missing))
        if not plan:
            return
        results = self.backend.generate([req for req, _ in plan])
        for (_, rows), res in zip(plan, results, strict=True):
            share = (
                res.prompt_tokens // max(len(rows), 1),
                res.prompt_tokens_reused // max(len(rows), 1),
            )
            for row, comp in zip(rows, res.completions, strict=True):
                data = {
                    **row.data,
                    "user_turn": comp.text,
                    "user_finish": comp.finish,
                    "user_tokens": comp.completion_tokens,
                    "thinking_markup": has_thinking_markup(comp.text),
                    "prompt_tokens": share[0],
                    "prompt_tokens_reused": share[1],
                }
                yield UserEvent(UserTurnRow(**{**row.__dict__, "data": data}), generated=True)

    def _plan_rows(
        self, ev: AnswerEvent, pert: Perturbation, ctx: list[Message], up: Any, temp: float
    ) -> list[UserTurnRow]:
        params = self.user_params(temp)
        rows = []
        for i in range(samples_at(temp, self.cfg.samples)):
            seed = derive_seed(self.cfg.seed, ev.item.id, temp, i)
            key = content_key(
                self.backend.model_id,
                self.backend.revision,
                self.template.sha,
                up.prompt_sha,
                "user",
                params.key(),
                i,
                seed,
                pert.id,
            )
            data = {
                "messages": ctx,
                "prompt_sha": up.prompt_sha,
                "template_sha": self.template.sha,
                "family": self.backend.family,
                "content_survived": up.content_survived,
                "removed": up.removed,
                "reference_turn": ev.item.reference_turn,
                "perturbation_version": pert.version,
            }
            rows.append(
                UserTurnRow(
                    key=key,
                    answer_key=ev.key,
                    item_id=ev.item.id,
                    model=self.backend.model_id,
                    dataset=ev.item.dataset,
                    temperature=temp,
                    sample=i,
                    seed=seed,
                    perturbation=pert.id,
                    data=data,
                )
            )
        return rows

    def process(
        self, items: list[Item], dataset: Dataset, known: dict[str, dict[str, Any]], done: set[str]
    ) -> Iterator[Event]:
        """Answers for the chunk first (the driver stores them as they come), then user
        turns. For llama.cpp a chunk is one item, so the user prompt extends the answer
        still in the KV cache."""
        answers = list(self.answers(items, dataset, known))
        yield from answers
        yield from self.user_turns(answers, done)


ProgressFn = Callable[[str, int], None]
