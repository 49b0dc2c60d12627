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
import operator
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment, safe_range

from userturn.errors import UserError
from userturn.types import Message

# End-of-turn markers per family; markers derived from the template are added to these.
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


RENDER_SECONDS = 10.0
"""Wall-clock budget of one render. Real templates render in milliseconds; a template
that loops for longer (nested ``range`` loops of 10^10 steps) is refused, not waited on."""
RENDER_BASE_CHARS = 1_000_000
RENDER_INPUT_FACTOR = 4
"""A render may produce at most ``RENDER_BASE_CHARS`` plus this many times the characters of
its messages: templates write each message once plus markup (a few write the system
prompt twice), so more is a runaway (a 100 MB render), refused before it is built."""
TEMPLATE_FAULTS = (TypeError, ValueError, ArithmeticError, LookupError, AttributeError)
"""What a template's own code can raise on its data (``1 / 0``, ``none + 1``, ``x[9]``):
faults of the template, reported as such, never a traceback."""


class _Runaway(Exception):
    """A render went past its time or size budget."""


class _Budget:
    """The time and size budget of one render, checked wherever a template can loop or
    grow: between output chunks, at every ``range`` step, call and ``*``/``**``."""

    def __init__(self, max_chars: int) -> None:
        self.deadline = time.monotonic() + RENDER_SECONDS
        self.max_chars = max_chars

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise _Runaway(f"rendering took longer than {RENDER_SECONDS:g} s (a runaway loop?)")

    def size(self, n: int) -> None:
        if n > self.max_chars:
            raise _Runaway(f"rendering would produce over {self.max_chars:,} characters")


class _BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox, plus the budget of the render in progress (one render at a time per
    template object; ``ChatTemplate`` gives each render its own budget)."""

    intercepted_binops = frozenset({"*", "**"})
    budget: _Budget | None = None

    def call_binop(self, context: Context, op: str, left: Any, right: Any) -> Any:
        if self.budget is not None:
            self.budget.tick()
            if op == "*":
                self._check_repeat(left, right)
            elif isinstance(left, int) and isinstance(right, int) and abs(left) > 1:
                self.budget.size(right * max(1, abs(left).bit_length()) // 3)
        return operator.mul(left, right) if op == "*" else operator.pow(left, right)

    def _check_repeat(self, left: Any, right: Any) -> None:
        assert self.budget is not None
        for seq, times in ((left, right), (right, left)):
            if isinstance(seq, str | list | tuple) and isinstance(times, int):
                self.budget.size(len(seq) * times)

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        if __self.budget is not None:
            __self.budget.tick()
        return super().call(__context, __obj, *args, **kwargs)

    def bounded_range(self, *args: int) -> Iterator[int]:
        for i, value in enumerate(safe_range(*args)):
            if i % 1024 == 0 and self.budget is not None:
                self.budget.tick()
            yield value


@contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    """On the main thread, a timer that interrupts the render itself: a loop over a long
    string calls nothing the budget could check. Elsewhere the budget's checks apply."""
    usable = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    if not usable or signal.getsignal(signal.SIGALRM) not in (signal.SIG_DFL, None):
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise _Runaway(f"rendering took longer than {seconds:g} s (a runaway loop?)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _input_chars(messages: list[Message], kwargs: dict[str, Any]) -> int:
    return len(json.dumps([messages, kwargs], ensure_ascii=False, default=str))


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
        """The template's markup family, which picks its end-of-turn markers (above)."""
        for marker, name in _DIALECT_MARKERS:
            if marker in self.source:
                return name
        return ""

    @cached_property
    def sha(self) -> str:
        return sha256(self.source)

    @cached_property
    def _compiled(self) -> jinja2.Template:
        env = _BoundedEnvironment(
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=[jinja2.ext.loopcontrols, _GenerationTag],
        )
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = self._strftime_now
        env.globals["range"] = env.bounded_range
        try:
            return env.from_string(self.source)
        except jinja2.TemplateSyntaxError as exc:
            raise UserError(
                f"chat template does not parse: {exc}", file=self.name, line=exc.lineno
            ) from exc
        except RecursionError as exc:
            raise UserError("chat template is nested too deeply to parse", file=self.name) from exc

    def _strftime_now(self, fmt: str) -> str:
        # Frozen per run so prompt hashes (and resume) don't change from day to day.
        return dt.datetime.combine(self.date, dt.time(12, 0)).strftime(fmt)

    def render(
        self, messages: list[Message], *, add_generation_prompt: bool = False, **kwargs: Any
    ) -> str:
        """Render like HF ``apply_chat_template(tokenize=False)``."""
        context: dict[str, Any] = {"tools": None, "documents": None, **kwargs}
        template = self._compiled
        env = template.environment
        assert isinstance(env, _BoundedEnvironment)
        budget = _Budget(RENDER_BASE_CHARS + RENDER_INPUT_FACTOR * _input_chars(messages, kwargs))
        env.budget = budget
        try:
            with _alarm(RENDER_SECONDS + 1):
                return self._render_within(
                    budget, template, messages, add_generation_prompt, context
                )
        except _Runaway as exc:
            raise UserError(f"chat template stopped: {exc}", file=self.name) from exc
        except jinja2.TemplateError as exc:
            raise UserError(f"chat template raised: {exc}", file=self.name) from exc
        except RecursionError as exc:
            raise UserError(
                "chat template raised RecursionError: it recurses without end", file=self.name
            ) from exc
        except TEMPLATE_FAULTS as exc:
            raise UserError(
                f"chat template raised {type(exc).__name__}: {exc}", file=self.name
            ) from exc
        finally:
            env.budget = None

    def _render_within(
        self,
        budget: _Budget,
        template: jinja2.Template,
        messages: list[Message],
        add_generation_prompt: bool,
        context: dict[str, Any],
    ) -> str:
        """``Template.render``, chunk by chunk, with the budget checked as output grows."""
        parts, size = [], 0
        for chunk in template.generate(
            messages=alias_reasoning(messages),
            add_generation_prompt=add_generation_prompt,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
            **context,
        ):
            size += len(chunk)
            budget.size(size)
            budget.tick()
            parts.append(chunk)
        return "".join(parts)

    def strip_bos(self, text: str) -> str:
        """Drop a rendered BOS text only when the runtime adds BOS itself."""
        if self.runtime_adds_bos and self.bos_token and text.startswith(self.bos_token):
            return text[len(self.bos_token) :]
        return text
