"""A chat template rendered exactly as transformers renders it.

The probe must show a model exactly what its own template would show it. We render
ourselves, so every backend gets the same text, but with HF ``apply_chat_template``
semantics: sandboxed Jinja with ``trim_blocks``/``lstrip_blocks``, ``raise_exception``,
``strftime_now``, loop controls, ``{% generation %}``, ``tools``/``documents`` passed as
``None`` (``tools is not none`` must be false, not "undefined"), and reasoning aliased
across ``reasoning_content``/``thinking``/``reasoning`` (gpt-oss reads ``thinking``).
``tests/test_chat_templates.py`` checks the result against transformers' own renderer.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from userturn.errors import UserError
from userturn.types import Message

# End-of-turn markers per family (design.md); derived markers are added to these.
FAMILY_STOPS: dict[str, tuple[str, ...]] = {
    "chatml": ("<|im_end|>",),
    "gemma": ("<end_of_turn>",),
    "llama": ("<|eot_id|>",),
    "gpt-oss": ("<|end|>", "<|return|>", "<|start|>"),
    "glm": ("<|user|>", "<|assistant|>", "<|observation|>"),
}
_DIALECT_MARKERS = (
    ("<|im_start|>", "chatml"),
    ("<end_of_turn>", "gemma"),
    ("<|eot_id|>", "llama"),
    ("<|return|>", "gpt-oss"),
    ("<|observation|>", "glm"),
    ("[gMASK]", "glm"),
)
REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")
"""Names templates read a message's reasoning under; a message carrying one gets all the
names transformers gives it."""


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class _GenerationTag(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}`` marks assistant tokens for training
    masks in HF; for rendering it is transparent."""

    tags = {"generation"}  # noqa: RUF012 - jinja2 API expects a plain set

    def parse(self, parser: Any) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # HF's tojson keeps non-ASCII and doesn't HTML-escape, unlike Jinja's default.
    return json.dumps(
        value,
        ensure_ascii=ensure_ascii,
        indent=indent,
        separators=separators,
        sort_keys=sort_keys,
    )


def alias_reasoning(messages: list[Message]) -> list[Message]:
    """Give a message's reasoning every name a template may read it under.

    transformers does this before rendering (``thinking`` for gpt-oss, ``reasoning_content``
    for the rest), so a template sees the reasoning whichever name the caller used.
    """
    out: list[Message] = []
    for msg in messages:
        reasoning = next((msg[k] for k in REASONING_FIELDS if msg.get(k) is not None), None)
        if reasoning is not None:
            msg = {"thinking": reasoning, **msg, "reasoning_content": reasoning}
        out.append(msg)
    return out


@dataclass(frozen=True)
class ChatTemplate:
    """A chat template plus the special-token texts and the frozen date it renders with.

    ``runtime_adds_bos`` says whether the runtime that tokenizes the prompt prepends BOS
    itself (llama.cpp's ``add_bos_token``, HF ``add_special_tokens``): only then is a
    rendered BOS text stripped, so SmolLM2 (``bos_token == "<|im_start|>"``,
    ``add_bos_token = false``) keeps its first header.
    """

    source: str
    name: str
    bos_token: str = ""
    eos_token: str = ""
    date: dt.date = field(default_factory=dt.date.today)
    runtime_adds_bos: bool = False

    @cached_property
    def dialect(self) -> str:
        """The template's markup family, for the end-of-turn table in design.md."""
        for marker, name in _DIALECT_MARKERS:
            if marker in self.source:
                return name
        return ""

    @cached_property
    def sha(self) -> str:
        return sha256(self.source)

    @cached_property
    def _compiled(self) -> jinja2.Template:
        env = ImmutableSandboxedEnvironment(
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=[jinja2.ext.loopcontrols, _GenerationTag],
        )
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = self._strftime_now
        try:
            return env.from_string(self.source)
        except jinja2.TemplateSyntaxError as exc:
            raise UserError(
                f"chat template does not parse: {exc}", file=self.name, line=exc.lineno
            ) from exc

    def _strftime_now(self, fmt: str) -> str:
        # Frozen per run so prompt hashes (and resume) don't change from day to day.
        return dt.datetime.combine(self.date, dt.time(12, 0)).strftime(fmt)

    def render(
        self, messages: list[Message], *, add_generation_prompt: bool = False, **kwargs: Any
    ) -> str:
        """Render like HF ``apply_chat_template(tokenize=False)``."""
        context: dict[str, Any] = {"tools": None, "documents": None, **kwargs}
        try:
            return self._compiled.render(
                messages=alias_reasoning(messages),
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                **context,
            )
        except jinja2.TemplateError as exc:
            raise UserError(f"chat template raised: {exc}", file=self.name) from exc

    def strip_bos(self, text: str) -> str:
        """Drop a rendered BOS text only when the runtime adds BOS itself."""
        if self.runtime_adds_bos and self.bos_token and text.startswith(self.bos_token):
            return text[len(self.bos_token) :]
        return text
