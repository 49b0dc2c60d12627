"""Generic JSONL conversations: ``jsonl:PATH`` with one ``{"id", "messages"}`` per line.

Source: your own file. License: yours. Example row::

    {"id": "q1", "messages": [{"role": "user", "content": "What is 7*6?"}]}

Conversations ending in a user turn are answered by the model; ending in an assistant
turn they are held-out contexts (the assistant turn is given). An optional
``reference_turn`` string is the real next user turn.
"""

from __future__ import annotations

from pathlib import Path

from userturn.datasets._rows import BadRows, Row, jsonl_rows
from userturn.datasets.base import Dataset, check_messages, require_id
from userturn.errors import UserError
from userturn.types import Item


class JsonlDataset(Dataset):
    name = "jsonl"
    source = "local JSONL file"
    license = "user-supplied"

    @property
    def id(self) -> str:
        return f"jsonl:{Path(self.spec.target).name}"

    def load(self) -> list[Item]:
        if not self.spec.target:
            raise UserError("jsonl needs a path: jsonl:PATH", field="dataset")
        path = Path(self.spec.target)
        items: list[Item] = []
        seen: set[str] = set()
        bad = BadRows(self.id, self.skip_bad_rows)
        for row in jsonl_rows(path):
            try:
                items.append(self._item(row, path, seen))
            except UserError as err:
                bad.handle(err)  # raises unless --skip-bad-rows
        bad.report()
        return items

    def _item(self, row: Row, path: Path, seen: set[str]) -> Item:
        if row.error is not None:
            raise row.error
        obj, line = row.data, row.line
        item_id = require_id(obj, path, line)
        if item_id in seen:
            raise UserError(f"duplicate id {item_id!r}", file=str(path), line=line, field="id")
        messages = check_messages(obj.get("messages"), path, line)
        ref = obj.get("reference_turn")
        if ref is not None and not isinstance(ref, str):
            raise UserError("expected a string", file=str(path), line=line, field="reference_turn")
        seen.add(item_id)
        return Item(id=item_id, dataset=self.id, messages=messages, reference_turn=ref)
