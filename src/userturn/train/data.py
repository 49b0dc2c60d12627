"""Conversations → token ids with loss masks built from the model's own chat template.

Why the template and not a generic formatter: the probe shows the model its template and
opens a *user* header; training that should change what the model writes there must put
the loss on exactly the tokens the model writes after that header. So the conversation
is rendered with ``userturn.chat.ChatTemplate.render`` (the text the probe uses), each
message's content is located in the rendering, and a token is trained when it overlaps a
trained character span:

- ``user``: the content of every user turn that follows an assistant turn, plus the
  user's end-of-turn marker (``derive_markers``), i.e. what the model must write after the
  user header in the probe, including knowing when to stop; the opening request is not
  a follow-up and is never trained;
- ``assistant``: every assistant turn's content plus its end marker (ordinary SFT);
- ``both``: the union.

Locating contents: a second rendering with one sentinel per message gives the template
text between contents; the real rendering is walked segment by segment, so a short
content ("user") can't be mistaken for a role header. A template that rewrites a content
(beyond trimming) makes the conversation unusable, and it is skipped with a count.

Sources: ``sharegpt`` (the PyPI mirror, parsed record by record because it is truncated)
or ``sharegpt:PATH``, and any JSONL of ``{"messages": [...]}`` or ``{"conversations":
[...]}`` (``role``/``content`` or ShareGPT ``from``/``value``), as ``PATH`` or
``jsonl:PATH``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from userturn import assets
from userturn.chat import FAMILY_STOPS, ChatTemplate, TurnMarkers, derive_markers
from userturn.datasets._rows import Row, json_array_rows, jsonl_rows
from userturn.datasets._source import to_messages
from userturn.datasets.sources import SHAREGPT
from userturn.errors import UserError
from userturn.types import Message

log = logging.getLogger(__name__)

LossOn = Literal["assistant", "user", "both"]
LOSS_ON: tuple[LossOn, ...] = ("assistant", "user", "both")
IGNORE = -100
"""The label of a token that carries no loss (transformers' ``ignore_index``)."""


@dataclass(frozen=True)
class Span:
    """Characters ``[start, end)`` of the rendering that carry loss."""

    start: int
    end: int
    role: str
    index: int
    """The message's position in the conversation."""


@dataclass(frozen=True)
class Rendered:
    text: str
    spans: tuple[Span, ...]

    def trained_text(self) -> list[str]:
        return [self.text[s.start : s.end] for s in self.spans]


@dataclass(frozen=True)
class Example:
    input_ids: list[int]
    labels: list[int]

    @property
    def trained_tokens(self) -> int:
        return sum(1 for x in self.labels if x != IGNORE)


@dataclass
class DataStats:
    """What the source gave and what became training examples (``train.json``)."""

    read: int = 0
    used: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    tokens: int = 0
    trained_tokens: int = 0

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


def template_from_tokenizer(tokenizer: Any, name: str) -> ChatTemplate:
    """The chat template a transformers tokenizer carries, as a ``ChatTemplate``.

    ``runtime_adds_bos`` stays False: examples are tokenized with
    ``add_special_tokens=False``, so the rendered BOS text is the only BOS.
    """
    source = tokenizer.chat_template
    if isinstance(source, dict):
        source = source.get("default")
    if not source:
        raise UserError("this tokenizer has no chat template", file=name, field="--model")
    return ChatTemplate(
        source=str(source),
        name=f"{name}#tokenizer.chat_template",
        bos_token=tokenizer.bos_token or "",
        eos_token=tokenizer.eos_token or "",
    )


def _sentinel(i: int) -> str:
    return f"\u2063USERTURN_TRAIN_{i}\u2063"


def _segments(tpl: ChatTemplate, messages: list[Message]) -> list[str]:
    """The template text before each message's content, and after the last one."""
    masked = [{**m, "content": _sentinel(i)} for i, m in enumerate(messages)]
    text = tpl.render(masked)
    segs, pos = [], 0
    for i in range(len(messages)):
        s = _sentinel(i)
        if text.count(s) != 1:
            raise UserError(
                f"message {i} renders {text.count(s)} times, expected once", file=tpl.name
            )
        at = text.index(s)
        segs.append(text[pos:at])
        pos = at + len(s)
    segs.append(text[pos:])
    return segs


def _find_content(text: str, content: str, pos: int) -> tuple[int, int] | None:
    for cand in (content, content.strip()):
        at = text.find(cand, pos) if cand else pos
        if at >= 0:
            return at, at + len(cand)
    return None


def _trained(messages: list[Message], loss_on: LossOn) -> list[bool]:
    """Which messages carry loss; a user turn counts only after an assistant turn."""
    out, seen_assistant = [], False
    for m in messages:
        role = m["role"]
        user = role == "user" and seen_assistant and loss_on in ("user", "both")
        asst = role == "assistant" and loss_on in ("assistant", "both")
        out.append(user or asst)
        seen_assistant = seen_assistant or role == "assistant"
    return out


def _end_length(text: str, pos: int, tpl: ChatTemplate, markers: TurnMarkers, role: str) -> int:
    """Length of what closes the turn at ``pos``: the derived end marker, else the
    shortest stop string found there (a template with no user end marker, like GLM's,
    closes a user turn with the next role header, and that is what the probe stops on)."""
    end = markers.user_end if role == "user" else markers.assistant_end
    for cand in (end, end.strip()):
        if cand and text.startswith(cand, pos):
            return len(cand)
    stops = markers.user_stops(tpl) if role == "user" else markers.answer_stops(tpl)
    found = [
        len(c)
        for c in (*stops, *FAMILY_STOPS.get(tpl.dialect, ()))
        if c and text.startswith(c, pos)
    ]
    return min(found, default=0)


def render_with_spans(
    tpl: ChatTemplate, messages: list[Message], loss_on: LossOn, markers: TurnMarkers | None = None
) -> Rendered:
    """Render ``messages`` and return the character spans that carry loss.

    Each span is the message's content (as rendered, possibly trimmed) plus its role's
    end-of-turn marker when the rendering has it right after the content.
    """
    if loss_on not in LOSS_ON:
        raise UserError(f"expected one of {', '.join(LOSS_ON)}, got {loss_on!r}", field="--loss-on")
    markers = markers or derive_markers(tpl)
    text = tpl.render(messages)
    segs = _segments(tpl, messages)
    spans, pos = [], 0
    for i, (m, train) in enumerate(zip(messages, _trained(messages, loss_on), strict=True)):
        if text.startswith(segs[i], pos):
            pos += len(segs[i])
        found = _find_content(text, str(m.get("content") or ""), pos)
        if found is None:
            raise UserError(
                f"the template rewrote message {i}'s content; cannot mask it", file=tpl.name
            )
        start, pos = found  # the next template segment starts right after the content
        if train:
            end = pos + _end_length(text, pos, tpl, markers, str(m["role"]))
            spans.append(Span(start, end, str(m["role"]), i))
    return Rendered(text, tuple(spans))


def tokenize_rendered(tokenizer: Any, rendered: Rendered, max_length: int) -> Example:
    """Token ids (no added special tokens) and labels: a token is trained when its
    characters overlap a trained span. Truncated to ``max_length`` (keep the start)."""
    try:
        enc = tokenizer(rendered.text, add_special_tokens=False, return_offsets_mapping=True)
    except NotImplementedError as exc:  # slow (Python) tokenizers have no offsets
        raise UserError(
            "loss masks need a fast tokenizer (character offsets)", field="--model"
        ) from exc
    ids: list[int] = list(enc["input_ids"])[:max_length]
    offsets = list(enc["offset_mapping"])[:max_length]
    labels = []
    for tok, (a, b) in zip(ids, offsets, strict=True):
        hit = any(a < s.end and b > s.start for s in rendered.spans)
        labels.append(int(tok) if hit else IGNORE)
    return Example(ids, labels)


def build_examples(
    tokenizer: Any,
    tpl: ChatTemplate,
    conversations: Iterator[list[Message]],
    loss_on: LossOn,
    *,
    max_examples: int,
    max_length: int,
) -> tuple[list[Example], DataStats]:
    """Examples until ``max_examples``; conversations with no trained token left after
    truncation (e.g. the first follow-up lies beyond ``max_length``) are skipped."""
    markers = derive_markers(tpl)
    stats = DataStats()
    out: list[Example] = []
    for messages in conversations:
        if len(out) >= max_examples:
            break
        stats.read += 1
        try:
            rendered = render_with_spans(tpl, messages, loss_on, markers)
        except UserError as exc:
            log.debug("skipping a conversation: %s", exc)
            stats.skip("template could not render or mask it")
            continue
        ex = tokenize_rendered(tokenizer, rendered, max_length)
        if not ex.trained_tokens:
            stats.skip("no trained token within max_length")
            continue
        out.append(ex)
        stats.used += 1
        stats.tokens += len(ex.input_ids)
        stats.trained_tokens += ex.trained_tokens
    return out, stats


def check_source(source: str) -> None:
    """Fail at config time (before a model loads) on a data source that can't exist."""
    if source == "sharegpt":
        return
    path = Path(source.partition(":")[2] if source.startswith(("sharegpt:", "jsonl:")) else source)
    if not path.is_file():
        raise UserError(
            "expected sharegpt, sharegpt:PATH or a JSONL file of conversations",
            file=str(path),
            field="--data",
        )


def conversations(source: str) -> Iterator[list[Message]]:
    """Checked conversations (alternating, starting with the user) from a source.

    The ShareGPT mirror is messy real data: a record that isn't a clean conversation
    is skipped (debug-logged). A user's JSONL is strict: a bad line is an error naming
    file and line.
    """
    if source == "sharegpt" or source.startswith("sharegpt:"):
        path = Path(source.partition(":")[2]) if ":" in source else assets.fetch(SHAREGPT)
        if not path.is_file():
            raise UserError("file not found", file=str(path), field="--data")
        yield from _sharegpt(json_array_rows(path) if path.suffix == ".json" else jsonl_rows(path))
        return
    path = Path(source.removeprefix("jsonl:"))
    if not path.is_file():
        raise UserError(
            "expected sharegpt, sharegpt:PATH or a JSONL file of conversations",
            file=str(path),
            field="--data",
        )
    for row in jsonl_rows(path):
        if row.error is not None:
            raise row.error
        yield _row_messages(row)


def _sharegpt(rows: Iterator[Row]) -> Iterator[list[Message]]:
    for row in rows:
        if row.error is not None or not row.data.get("conversations"):
            continue
        try:
            yield _row_messages(row)
        except UserError as exc:
            log.debug("sharegpt: skipping record: %s", exc)


def _row_messages(row: Row) -> list[Message]:
    key = "messages" if "messages" in row.data else "conversations"
    raw = row.data.get(key)
    if not isinstance(raw, list) or not raw:
        raise row.fail("expected a non-empty list under 'messages' or 'conversations'", key)
    sharegpt_style = isinstance(raw[0], dict) and "from" in raw[0]
    keys = {"role_key": "from", "content_key": "value"} if sharegpt_style else {}
    return [dict(m) for m in to_messages(raw, row, key, **keys)]
