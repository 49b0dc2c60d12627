"""How the LLM judge talks to its model: an OpenAI-compatible chat endpoint, or any
in-process backend through its own chat template.

**HTTP.** ``/v1/chat/completions`` with the output constrained by ``response_format``.
Servers differ, and what a server takes is found once per (server, model) with the first
real request (``http.ShapeDetector``): a refusal that names a field moves to the next
shape at once (a capability check, not a retried error); other failures go through the
client's normal retries and settle nothing.

- ``response_format``: OpenAI and vLLM take ``{"type": "json_schema"}``; llama-cpp-python
  takes ``{"type": "json_object", "schema": ...}`` and answers ``json_schema`` with HTTP
  500. After ``none`` the reply is parsed leniently.
- Reasoning models (OpenAI's o-series, gpt-5) refuse ``max_tokens`` ("use
  ``max_completion_tokens``") and any ``temperature`` but the default: the budget moves
  to ``max_completion_tokens`` and the temperature is left out. Their budget then
  includes reasoning tokens, so raise ``max_tokens=`` for them.
- Self-hosted servers (vLLM, SGLang) get ``chat_template_kwargs`` with ``enable_thinking``
  false (``thinking=on`` turns it on), so a thinking model answers with the verdict instead
  of a long draft; hosted OpenAI isn't sent it, and a server that refuses it isn't again.

**In-process** (``llm:llamacpp:PATH``, ``llm:hf:...``): the judge chat is rendered with
the backend's template (``enable_thinking`` as above) plus the assistant header and
continued as a raw completion at T=0, then parsed leniently (the backend protocol has no
grammar). Template tokens inside the judged text are defused with a zero-width space so
that llama.cpp's special-token parsing can't turn the candidate's artifacts into real
turn boundaries.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, TypeVar
from urllib.parse import urlparse

from userturn.backends.base import Backend, TemplateOptions
from userturn.chat import answer_prompt, derive_markers
from userturn.errors import UserError
from userturn.http import CallResult, FinalIf, OpenAIClient, ShapeDetector, refuses
from userturn.judges.rubric import SCHEMA
from userturn.types import GenRequest, Message, SamplingParams

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")

FORMATS = ("json_schema", "json_object_schema", "none")
TokenField = Literal["max_tokens", "max_completion_tokens"]
_SPECIAL = re.compile(r"<(\|[^|<>\s]{1,40}\|)>|<(/?s|start_of_turn|end_of_turn)>|\[(/?INST)\]")
_UNSUPPORTED = ("unsupported", "not supported", "does not support", "only the default")


@dataclass(frozen=True)
class Reply:
    text: str | None = None
    error: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)


class ChatModel(Protocol):
    @property
    def key(self) -> str:
        """Identity of the judging model for the cache (model + where it is served)."""

    def complete(self, messages: list[Message], max_tokens: int) -> Reply: ...

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]: ...

    def each(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[int, R]]:
        """(index, ``fn(item)``) for every item, each as soon as it is done."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class ChatShape:
    """What a chat request carries; the richest shape first, adapted by refusals."""

    form: str = "json_schema"
    token_field: TokenField = "max_tokens"
    temperature: bool = True
    template_kwargs: bool = True


def response_format(form: str) -> dict[str, Any] | None:
    if form == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": "judgment", "schema": SCHEMA, "strict": True},
        }
    if form == "json_object_schema":
        return {"type": "json_object", "schema": SCHEMA}
    return None


def rejects_format(failure: CallResult) -> bool:
    """A 400/422/500 whose body names the field: the server can't take this form."""
    return refuses(failure, "response_format") or refuses(failure, "json_schema")


def adapt_chat(shape: ChatShape, failure: CallResult) -> ChatShape | None:
    """The next shape to try after ``failure``, or None if it refuses nothing we sent.

    The budget moves only when the server names ``max_completion_tokens`` (our request
    never contains it, so that can't be an echo of the request), and the temperature
    goes only when the server says it is unsupported.
    """
    text = failure.body.lower()
    if shape.form != "none" and rejects_format(failure):
        return replace(shape, form=FORMATS[FORMATS.index(shape.form) + 1])
    if (
        shape.token_field == "max_tokens"
        and refuses(failure, "max_tokens")
        and "max_completion_tokens" in text
    ):
        return replace(shape, token_field="max_completion_tokens")
    if (
        shape.temperature
        and refuses(failure, "temperature")
        and any(w in text for w in _UNSUPPORTED)
    ):
        return replace(shape, temperature=False)
    if shape.template_kwargs and refuses(failure, "chat_template_kwargs"):
        return replace(shape, template_kwargs=False)
    return None


def chat_body(
    shape: ChatShape, messages: list[Message], max_tokens: int, thinking: bool = False
) -> dict[str, Any]:
    """The keyword arguments of one judge request in ``shape`` (pure)."""
    body: dict[str, Any] = {"messages": messages, shape.token_field: max_tokens}
    if shape.temperature:
        body["temperature"] = 0.0
    fmt = response_format(shape.form)
    if fmt is not None:
        body["response_format"] = fmt
    if shape.template_kwargs:
        body["extra_body"] = {"chat_template_kwargs": {"enable_thinking": thinking}}
    return body


class HTTPChatModel:
    def __init__(self, client: OpenAIClient, thinking: bool = False) -> None:
        self.client = client
        self.thinking = thinking
        self._pool: ThreadPoolExecutor | None = None
        hosted = (urlparse(client.server).hostname or "").endswith("openai.com")
        self.shapes = ShapeDetector(
            ("chat", client.server, client.model),
            ChatShape(template_kwargs=not hosted),
            adapt_chat,
        )

    @property
    def key(self) -> str:
        """Model, server and the server's fingerprint, so that another checkpoint served
        under the same name doesn't reuse cached verdicts."""
        think = "on" if self.thinking else "off"
        fp = self.client.fingerprint()
        return f"openai:{self.client.model}@{self.client.server}#{fp};thinking={think}"

    @property
    def form(self) -> str | None:
        """The ``response_format`` form found for this server, once known."""
        shape = self.shapes.shape
        return shape.form if shape is not None else None

    def complete(self, messages: list[Message], max_tokens: int) -> Reply:
        self.client.server_entry()  # a dead server: one UserError, before any request

        def send(shape: ChatShape, final_if: FinalIf) -> CallResult:
            body = chat_body(shape, messages, max_tokens, self.thinking)
            return self.client.request("chat", final_if=final_if, **body)

        return self._reply(self.shapes.call(send))

    @staticmethod
    def _reply(res: CallResult) -> Reply:
        if not res.ok:
            return Reply(error=f"{res.error} {res.body[:200]}".strip(), usage=res.usage)
        assert res.response is not None
        message = res.response["choices"][0].get("message") or {}
        content = message.get("content")
        return Reply(text=content if isinstance(content, str) else None, usage=res.usage)

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        return self.client.map(fn, items)

    def each(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[int, R]]:
        """Up to ``concurrency`` calls in flight (the client's limiter still decides how
        many reach the server), yielded in the order they finish; the calls not started
        when the caller stops (a Ctrl-C) are cancelled."""
        if len(items) <= 1:
            yield from ((i, fn(x)) for i, x in enumerate(items))
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                self.client.concurrency, thread_name_prefix="userturn-judge"
            )
        futures = {self._pool.submit(fn, x): i for i, x in enumerate(items)}
        try:
            for fut in as_completed(futures):
                yield futures[fut], fut.result()
        finally:
            for fut in futures:
                fut.cancel()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self.client.close()


def defuse(text: str) -> str:
    """``<|im_end|>`` -> ``<\u200b|im_end|>``: seen as text, not as a control token."""
    return _SPECIAL.sub(lambda m: m.group(0)[0] + "\u200b" + m.group(0)[1:], text)


class LocalChatModel:
    """Any in-process backend as a chat model, through its own template."""

    def __init__(self, backend: Backend, thinking: bool = False) -> None:
        self.backend = backend
        self.thinking = thinking
        self.template = backend.template(TemplateOptions(date=dt.date.today()))
        self.stops = derive_markers(self.template, enable_thinking=thinking).answer_stops(
            self.template
        )
        think = "on" if thinking else "off"
        self.key = f"{backend.spec.kind}:{backend.model_id}@{backend.revision};thinking={think}"

    def complete(self, messages: list[Message], max_tokens: int) -> Reply:
        safe = [{**m, "content": defuse(str(m["content"]))} for m in messages]
        prompt = answer_prompt(self.template, safe, enable_thinking=self.thinking)
        params = SamplingParams(temperature=0.0, max_tokens=max_tokens, stop=self.stops, seed=0)
        try:
            res = self.backend.generate([GenRequest(prompt, "assistant", params, (0,))])[0]
        except UserError as exc:  # e.g. this one prompt exceeds n_ctx
            return Reply(error=str(exc), usage={"calls": 0})
        comp = res.completions[0]
        return Reply(
            text=comp.text,
            usage={
                "calls": 1,
                "prompt_tokens": res.prompt_tokens,
                "completion_tokens": comp.completion_tokens,
            },
        )

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        return [fn(x) for x in items]

    def each(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[int, R]]:
        """One call at a time (one model in this process), each yielded when done."""
        for i, x in enumerate(items):
            yield i, fn(x)

    def close(self) -> None:
        self.backend.close()
