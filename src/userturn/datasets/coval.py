"""CoVal (OpenAI, formerly "Collective Alignment 1"): value-sensitive prompts, each with
four candidate assistant responses (A-D) that about 1,000 people ranked.

Held-out: the context is the prompt plus one candidate response, chosen with
``?candidate=A`` (``A``-``D`` or ``0``-``3``; default ``A``, always part of the dataset id).
The candidates were written by OpenAI models, not by the model under test, so the answer
stage is skipped and the model writes the next user turn after someone else's answer.
CoVal has no real next user turn, so ``reference_turn`` is null (nothing for
``--judge-reference`` to judge).

Source: the Hub ``openai/coval`` (config ``comparisons``, split ``train``, 1,078 rows), or
``coval:PATH`` in its published format (``comparisons.jsonl``). No PyPI mirror. Prompts
are minimal chat transcripts; ``developer`` messages become one system message.
License: CC-BY-4.0.

Example row (made up, in the published format; assessments trimmed)::

    {"prompt_id": "p-001",
     "prompt": {"messages": [{"role": "user", "content": "Is it rude to recline my seat?"}]},
     "responses": [{"response_index": "A", "messages": [
                        {"role": "assistant", "content": "It depends on the flight ..."}]},
                   ...],
     "metadata": {"assessments": [{"ranking_blocks": {"world": [{"ranking": "A>B>C=D"}]}}]}}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from userturn.datasets._rows import Row
from userturn.datasets._source import RowDataset, SourceOptions, text_content, to_messages
from userturn.datasets.sources import HubSource
from userturn.errors import UserError
from userturn.types import Item

CANDIDATES = "ABCD"


@dataclass(frozen=True)
class CovalOptions(SourceOptions):
    candidate: str | None = None


class Coval(RowDataset):
    Options = CovalOptions
    options: CovalOptions
    name = "coval"
    source = "HF Hub openai/coval (comparisons) or a local comparisons.jsonl"
    license = "CC-BY-4.0"
    kind: Literal["self-answered", "held-out"] = "held-out"
    hub = HubSource("openai/coval", split="train", config="comparisons")

    @property
    def candidate(self) -> str:
        raw = (self.options.candidate or "A").strip().upper()
        letter = CANDIDATES[int(raw)] if raw.isdigit() and int(raw) < 4 else raw
        if letter not in CANDIDATES:
            raise UserError(f"expected A-D or 0-3, got {raw!r}", field="candidate")
        return letter

    @property
    def id(self) -> str:
        opts = {**self.spec.options, "candidate": self.candidate}
        return self.name + "?" + "&".join(f"{k}={v}" for k, v in sorted(opts.items()))

    def parse(self, row: Row) -> Item | None:
        prompt_id = str(row.get("prompt_id", (str, int)))
        prompt = row.get("prompt", dict)
        context = to_messages(prompt.get("messages"), row, "prompt.messages")
        if context[-1]["role"] != "user":
            raise row.fail("the prompt must end with a user message", "prompt.messages")
        answer = _candidate(row, self.candidate)
        return Item(
            id=f"coval-{prompt_id}-{self.candidate}",
            dataset=self.id,
            messages=(*context, {"role": "assistant", "content": answer}),
            meta={"candidate": self.candidate},
        )


def _candidate(row: Row, letter: str) -> str:
    """The chosen response's text; several assistant messages are joined."""
    for i, resp in enumerate(row.get("responses", list)):
        if not isinstance(resp, dict):
            raise row.fail("expected a response object", f"responses[{i}]")
        index = resp.get("response_index")
        if index != letter and not (
            isinstance(index, int) and CANDIDATES[index : index + 1] == letter
        ):
            continue
        texts = [_content(m, row, f"responses[{i}].messages") for m in resp.get("messages") or []]
        if not texts or not "".join(texts).strip():
            raise row.fail("empty response", f"responses[{i}].messages")
        return "\n\n".join(texts)
    raise row.fail(f"no candidate response {letter}", "responses")


def _content(message: Any, row: Row, field: str) -> str:
    if not isinstance(message, dict) or message.get("role") != "assistant":
        raise row.fail("expected assistant messages", field)
    content = text_content(message.get("content"))
    if content is None:
        raise row.fail("content must be text", field)
    return content
