"""The tasks userturn registers with inspect_ai (its ``inspect_ai`` entry point).

inspect finds a task by reading ``@task`` in the source, so the task is declared here
with inspect's own decorator; this module is imported only by inspect, which is why it
may import inspect at the top. ``inspect eval userturn/userturn_probe`` (installed) or
``inspect eval .../userturn/interop/inspect_registry.py@userturn_probe`` (a checkout).
"""

from __future__ import annotations

from inspect_ai import Task, task

from userturn.interop.inspect_task import userturn_probe_task


@task
def userturn_probe(
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
    """The one-turn probe: answer the item, write the next user turn, judge it."""
    return userturn_probe_task(
        template_model,
        dataset=dataset,
        limit=limit,
        judge=judge,
        temperature=temperature,
        max_answer_tokens=max_answer_tokens,
        max_user_tokens=max_user_tokens,
        chat_template=chat_template,
        seed=seed,
        date=date,
    )
