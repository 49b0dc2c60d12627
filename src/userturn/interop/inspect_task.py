"""The probe as an inspect_ai task: ``inspect eval`` runs it on a model inspect serves.

A chat endpoint can only write assistant turns, so the probe needs a raw-completions
provider: inspect's ``openai-api-completions/<service>/<model>`` sends a single user
message's text verbatim to ``/v1/completions`` (no chat template applied). The solver
renders every prompt with userturn's own code (the model's chat template, its markers
and stops, the answer and then the user header) and sends the rendered text through
that provider; the scorer is a userturn judge. So an ``inspect eval`` and a ``userturn
run`` on the same server, items and settings send byte-identical prompts and, at T=0,
get the same answers and user turns.

The generation itself is userturn's :class:`~userturn.run.worker.ItemWorker` driven by a
:class:`Backend` whose ``generate`` calls inspect's model: prompts, sampling
parameters, seeds and stops cannot drift from what ``userturn run`` does. The template
(and whether the server adds BOS) comes from a userturn model spec for the same model,
e.g. ``openai:smollm2?base_url=URL`` with ``chat_template=FILE``.

Usage (the task is registered with inspect by ``inspect_registry``)::

    inspect eval userturn/userturn_probe \\
        --model openai-api-completions/llamacpp/smollm2 \\
        --model-base-url http://127.0.0.1:8080/v1 \\
        -T template_model='openai:smollm2?base_url=http://127.0.0.1:8080/v1' \\
        -T chat_template=smollm2.jinja -T dataset=gsm8k -T limit=5
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.to_thread

from userturn.backends import load_backend
from userturn.backends.base import Backend
from userturn.backends.openai import NEUTRAL, SPECIAL
from userturn.config import RunConfig
from userturn.datasets import load_dataset
from userturn.judges import load_judge
from userturn.run.driver import select_items
from userturn.run.worker import ItemWorker
from userturn.types import Completion, Finish, GenRequest, GenResult, Item, JudgeInput

if TYPE_CHECKING:
    from inspect_ai import Task
    from inspect_ai.model import Model
    from inspect_ai.scorer import Scorer
    from inspect_ai.solver import Solver

CONFIG_ID = "inspect"


class InspectBackend(Backend):
    """userturn's backend interface over an inspect model on a raw-completions provider.

    The template, BOS handling and identity are those of ``base`` (a userturn backend for
    the same model); only generation goes through inspect, one request per sample as
    userturn's own ``openai:`` backend sends them, neutral sampling included.
    """

    def __init__(self, base: Backend, model: Model, call: Callable[..., Any]) -> None:
        # the spec and its typed options are the base backend's (this class is no plugin
        # of its own, so Backend.__init__ could not look its options up)
        self.spec = base.spec
        self.options = base.options
        self.base = base
        self.model = model
        self.call = call
        """Runs a coroutine function from this worker thread on inspect's event loop."""

    @property
    def model_id(self) -> str:
        return self.base.model_id

    @property
    def runtime_adds_bos(self) -> bool:
        return self.base.runtime_adds_bos

    def builtin_template(self) -> tuple[str, str, str, str]:
        return self.base.builtin_template()

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        return [
            GenResult(tuple(self.call(self._one, req, seed) for seed in req.seeds))
            for req in requests
        ]

    async def _one(self, req: GenRequest, seed: int | None) -> Completion:
        from inspect_ai.model import ChatMessageUser, GenerateConfig

        p = req.params
        config = GenerateConfig(
            temperature=p.temperature,
            top_p=p.top_p,
            max_tokens=p.max_tokens,
            stop_seqs=list(p.stop) or None,
            seed=seed,
            extra_body={**NEUTRAL, "top_k": p.top_k, **SPECIAL},
        )
        out = await self.model.generate([ChatMessageUser(content=req.prompt)], config=config)
        if out.error:
            from userturn.errors import UserError

            raise UserError(f"inspect model error: {out.error}", field="model")
        finish: Finish = "length" if out.stop_reason == "max_tokens" else "stop"
        tokens = out.usage.output_tokens if out.usage else 0
        return Completion(text=out.completion, finish=finish, completion_tokens=tokens)


def run_config(**kw: Any) -> RunConfig:
    """The probe's settings as a userturn config (one model, one temperature)."""
    return RunConfig(
        models=[kw["template_model"]],
        datasets=[kw["dataset"]],
        temperatures=[kw["temperature"]],
        samples=1,
        judges=[kw["judge"]] if kw.get("judge") else [],
        limit=kw.get("limit"),
        max_answer_tokens=kw["max_answer_tokens"],
        max_user_tokens=kw["max_user_tokens"],
        chat_template=kw.get("chat_template"),
        seed=kw.get("seed", 0),
    )


def _samples(cfg: RunConfig) -> tuple[list[Any], dict[str, Item]]:
    from inspect_ai.dataset import Sample

    ds = load_dataset(cfg.datasets[0])
    items = select_items(ds, cfg)
    samples = [
        Sample(
            id=it.id,
            input=[_chat(m) for m in it.messages],
            target=str((it.reference or {}).get("answer", "")),
            metadata={"item_id": it.id, "dataset": it.dataset},
        )
        for it in items
    ]
    return samples, {it.id: it for it in items}


def _chat(m: Any) -> Any:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    cls = {"system": ChatMessageSystem, "assistant": ChatMessageAssistant}.get(
        m["role"], ChatMessageUser
    )
    return cls(content=str(m["content"]))


def userturn_solver(cfg: RunConfig, items: dict[str, Item], date: dt.date) -> Solver:
    """Answer the item, then write the next user turn, both with userturn's prompts."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, ModelOutput, get_model
    from inspect_ai.solver import Generate, TaskState, solver

    @solver  # type: ignore[misc]
    def userturn_probe_solver() -> Any:
        base = load_backend(cfg.models[0], defaults={"base_url": cfg.base_url})
        ds = load_dataset(cfg.datasets[0])

        async def solve(state: TaskState, generate: Generate) -> TaskState:
            item = items[str(state.metadata["item_id"])]
            model = get_model()

            def work() -> tuple[Any, Any]:
                def call(fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> Any:
                    return anyio.from_thread.run(fn, *args)

                worker = ItemWorker(InspectBackend(base, model, call), cfg, date, CONFIG_ID)
                (answer,) = list(worker.answers([item], ds, {}))
                (turn,) = [ev.record for ev in worker.user_turns([answer], set())]
                return answer.record, turn

            answer, turn = await anyio.to_thread.run_sync(work)
            state.messages.append(ChatMessageAssistant(content=answer.text, source="generate"))
            state.messages.append(ChatMessageUser(content=turn.user_turn, source="generate"))
            state.output = ModelOutput.from_content(
                str(model), turn.user_turn, "max_tokens" if turn.user_finish == "length" else "stop"
            )
            state.metadata.update(
                answer=answer.text,
                answer_finish=answer.finish,
                correct=answer.correct,
                user_turn=turn.user_turn,
                user_finish=turn.user_finish,
                prompt_sha=turn.prompt_sha,
                context=list(turn.messages),
            )
            return state

        return solve

    result: Solver = userturn_probe_solver()
    return result


def userturn_scorer(judge_spec: str) -> Scorer:
    """A userturn judge's verdict on the user turn: 1 genuine, 0 not. An unparseable or
    errored verdict is no score (``None``), never a 0."""
    from inspect_ai.scorer import Score, Target, mean, scorer
    from inspect_ai.solver import TaskState

    @scorer(metrics=[mean()], name=judge_spec)  # type: ignore[misc]
    def userturn_judge() -> Any:
        judge = load_judge(judge_spec)

        async def score(state: TaskState, target: Target) -> Score | None:
            inp = JudgeInput(
                id=str(state.sample_id),
                messages=tuple(state.metadata["context"]),
                user_turn=str(state.metadata["user_turn"]),
            )
            (j,) = await anyio.to_thread.run_sync(judge.judge, [inp])
            meta = {"status": j.status, "label": j.label, "rationale": j.rationale}
            if j.status != "ok" or j.genuine is None:
                state.metadata["judgment"] = meta
                return None
            return Score(
                value=1 if j.genuine else 0,
                answer=j.label,
                explanation=j.rationale,
                metadata=meta,
            )

        return score

    result: Scorer = userturn_judge()
    return result


def userturn_probe_task(
    template_model: str,
    dataset: str = "gsm8k",
    limit: int | None = 5,
    judge: str = "rules",
    temperature: float = 0.0,
    max_answer_tokens: int = 256,
    max_user_tokens: int = 64,
    chat_template: str | None = None,
    seed: int = 0,
    date: str | None = None,
) -> Task:
    """The one-turn probe as an inspect Task (see the module docstring)."""
    from inspect_ai import Task

    cfg = run_config(
        template_model=template_model,
        dataset=dataset,
        limit=limit,
        judge=judge,
        temperature=temperature,
        max_answer_tokens=max_answer_tokens,
        max_user_tokens=max_user_tokens,
        chat_template=chat_template,
        seed=seed,
    )
    samples, items = _samples(cfg)
    day = dt.date.fromisoformat(date) if date else dt.date.today()
    return Task(
        dataset=samples,
        solver=userturn_solver(cfg, items, day),
        scorer=userturn_scorer(judge),
        name=f"userturn_probe_{dataset}",
        metadata={"userturn_config": cfg.model_dump(mode="json")},
    )
