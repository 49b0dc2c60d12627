"""How the LLM judge talks to its model: an OpenAI-compatible chat endpoint, or any
in-process backend through its own chat template.

**HTTP.** ``/v1/chat/completions`` with the output constrained by ``response_format``.
Servers differ: OpenAI and vLLM take ``{"type": "json_schema"}``; llama-cpp-python's
server takes ``{"type": "json_object", "schema": ...}`` and answers ``json_schema`` with
HTTP 500. Which form works is a fact about the server, so it is found once per (server,
model) with the first real request: a rejection that names the field moves to the next
form at once (a capability check, not a retried error); other failures go through the
client's normal retries and settle nothing. After ``none`` the reply is parsed leniently.

**In-process** (``llm:llamacpp:PATH``, ``llm:hf:...``): the judge chat is rendered with
the backend's template plus the assistant header and continued as a raw completion at
T=0, then parsed leniently (the backend protocol has no grammar). Template tokens inside
the judged text are defused with a zero-width space so that llama.cpp's special-token
parsing can't turn the candidate's artifacts into real turn boundaries.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from userturn.backends.base import Backend, TemplateOptions
from userturn.chat import answer_prompt, derive_markers
from userturn.errors import UserError
from userturn.http import CallResult, OpenAIClient
from userturn.judges.rubric import SCHEMA
from userturn.types import GenRequest, Message, SamplingParams

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")

FORMATS = ("json_schema", "json_object_schema", "none")
_SERVER_FORMATS: dict[tuple[str, str], str] = {}
"""(server, model) -> the response_format form that works there, found once per process."""
_SPECIAL = re.compile(r"<(\|[^|<>\s]{1,40}\|)>|<(/?s|start_of_turn|end_of_turn)>|\[(/?INST)\]")


@dataclass(frozen=True)
class Reply:
    text: str | None = None
    error: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)


class ChatModel(Protocol):
    key: str
    """Identity of the judging model for the cache (model + where it is served)."""

    def complete(self, messages: list[Message], max_tokens: int) -> Reply: ...

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]: ...

    def close(self) -> None: ...


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
    body = failure.body.lower()
    return failure.status_code in (400, 422, 500) and (
        "response_format" in body or "json_schema" in body
    )


class HTTPChatModel:
    def __init__(self, client: OpenAIClient) -> None:
        self.client = client
        self.key = f"openai:{client.model}@{client.server}"
        self._detect = threading.Lock()

    @property
    def form(self) -> str | None:
        return _SERVER_FORMATS.get((self.client.server, self.client.model))

    def complete(self, messages: list[Message], max_tokens: int) -> Reply:
        if self.form is None:
            with self._detect:  # one thread finds the form; the rest wait for it
                if self.form is None:
                    return self._detect_form(messages, max_tokens)
        assert self.form is not None
        return self._reply(self._call(messages, max_tokens, self.form))

    def _detect_form(self, messages: list[Message], max_tokens: int) -> Reply:
        for form in FORMATS:
            res = self._call(messages, max_tokens, form)
            if res.ok:
                _SERVER_FORMATS[(self.client.server, self.client.model)] = form
                log.info(
                    "%s: judge output constrained with response_format %s", self.client.server, form
                )
            if res.ok or not rejects_format(res):
                return self._reply(res)
            log.info(
                "%s rejects response_format %s (HTTP %s); trying the next form",
                self.client.server,
                form,
                res.status_code,
            )
        raise AssertionError("the last form sends no response_format, so can't be rejected")

    def _call(self, messages: list[Message], max_tokens: int, form: str) -> CallResult:
        kwargs: dict[str, Any] = {
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": 0.0,
        }
        fmt = response_format(form)
        if fmt is not None:
            kwargs["response_format"] = fmt
        return self.client.request("chat", final_if=rejects_format, **kwargs)

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

    def close(self) -> None:
        self.client.close()


def defuse(text: str) -> str:
    """``<|im_end|>`` -> ``<\u200b|im_end|>``: seen as text, not as a control token."""
    return _SPECIAL.sub(lambda m: m.group(0)[0] + "\u200b" + m.group(0)[1:], text)


class LocalChatModel:
    """Any in-process backend as a chat model, through its own template."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.template = backend.template(TemplateOptions(date=dt.date.today()))
        self.stops = derive_markers(self.template).answer_stops(self.template)
        self.key = f"{backend.spec.kind}:{backend.model_id}@{backend.revision}"

    def complete(self, messages: list[Message], max_tokens: int) -> Reply:
        safe = [{**m, "content": defuse(str(m["content"]))} for m in messages]
        prompt = answer_prompt(self.template, safe)
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

    def close(self) -> None:
        self.backend.close()
