"""GPQA Diamond: graduate-level multiple-choice science questions, scored by the letter.

Source: the official CSV (``gpqa_diamond.csv``, 198 rows) from a path you supply
(``gpqa:PATH``; CSV, JSONL or parquet with the same columns), or the gated Hub dataset
``Idavidrein/gpqa`` (config ``gpqa_diamond``, split ``train``; needs an HF token that has
accepted its terms). There is no PyPI mirror, and none should exist: the authors ask that
the questions not be published in plain text. License: CC-BY-4.0.

Columns used: ``Question``, ``Correct Answer``, ``Incorrect Answer 1..3`` and, when present,
``Record ID`` (the item id; else the row number). The four options are shuffled with a
per-item seed, sha256(dataset seed, item id) (``?seed=N``, default 0), so the gold letter
is stable across runs and machines; the order and seed are recorded in the item's
``reference`` and ``meta``. The prompt asks for reasoning, then a last line
``Answer: X``; the letter is extracted robustly (``scoring.multiple_choice``).

Example row (made up, in the official format)::

    Question,Correct Answer,Incorrect Answer 1,Incorrect Answer 2,Incorrect Answer 3,Record ID
    "Which gas is most abundant in dry air?",Nitrogen,Oxygen,Argon,Carbon dioxide,recX1
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any

from userturn.datasets._rows import Row
from userturn.datasets._source import RowDataset, SourceOptions, user_item
from userturn.datasets.sources import HubSource
from userturn.scoring.multiple_choice import LETTERS, score_choice
from userturn.types import Item

PROMPT = (
    "Answer the following multiple-choice question. Think it through step by step, then "
    'give your final answer on the last line in the form "Answer: X", where X is one '
    "of A, B, C or D.\n\n{question}\n\n{options}"
)
COLUMNS = ("Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


def shuffle_seed(dataset_seed: int, item_id: str) -> int:
    blob = f"{dataset_seed}\x1f{item_id}".encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big")


@dataclass(frozen=True)
class GPQAOptions(SourceOptions):
    seed: int = 0


class GPQA(RowDataset):
    Options = GPQAOptions
    options: GPQAOptions
    name = "gpqa"
    source = "official GPQA CSV (local) or HF Hub Idavidrein/gpqa (gated)"
    license = "CC-BY-4.0"
    scored = True
    hub = HubSource("Idavidrein/gpqa", split="train", config="gpqa_diamond")

    @property
    def seed(self) -> int:
        return self.options.seed

    def parse(self, row: Row) -> Item | None:
        question = row.get("Question", str).strip()
        answers = [row.get(col, str).strip() for col in COLUMNS]
        if len(set(answers)) < len(answers):
            raise row.fail("two options have the same text", "Incorrect Answer 1")
        record = str(row.data.get("Record ID") or "").strip()
        item_id = f"gpqa-{record or row.line}"
        seed = shuffle_seed(self.seed, item_id)
        order = list(range(len(answers)))
        random.Random(seed).shuffle(order)  # order[i] = original index shown as letter i
        options = [answers[i] for i in order]
        gold = LETTERS[order.index(0)]
        shown = "\n".join(f"{LETTERS[i]}) {opt}" for i, opt in enumerate(options))
        ref = {"gold": gold, "options": options, "order": order, "shuffle_seed": seed}
        return user_item(
            self,
            item_id,
            PROMPT.format(question=question, options=shown),
            reference=ref,
            meta={"gold": gold, "order": order, "shuffle_seed": seed},
        )

    def score(self, item: Item, final_answer: str) -> dict[str, Any] | None:
        assert item.reference is not None, f"gpqa item {item.id} has no gold letter"
        return score_choice(
            final_answer, str(item.reference["gold"]), list(item.reference["options"])
        )
