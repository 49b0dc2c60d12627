"""Chat-template rendering for the user-turn probe (the heart of userturn).

The probe must show a model exactly what its own template would show it, then open a
*user* header and let the same weights continue. Everything here follows HF
``apply_chat_template`` semantics (sandboxed Jinja, ``trim_blocks``/``lstrip_blocks``,
``raise_exception``, ``strftime_now``, loop controls, ``{% generation %}``) so the prompt
is the one the model was trained on, but it is rendered by us, so every backend gets the
same text.

Why sentinels: the user-turn prompt is "the conversation, then the user header". Asking
the template for ``add_generation_prompt`` only ever opens an assistant header, and
``continue_final_message`` with an empty user message behaves differently across
transformers versions. Rendering ``[..., user SENTINEL]`` and cutting before the sentinel
gives the header exactly as the template writes it.
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
from userturn.types import HistoryReasoning, Message

SENTINEL = "\u2063USERTURN_SENTINEL_7f3a\u2063"
SENTINEL2 = "\u2063USERTURN_SENTINEL_b21c\u2063"
SENTINEL3 = "\u2063USERTURN_SENTINEL_c94e\u2063"

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
THINK_MARKERS = ("<think>", "</think>", "<|channel|>", "<|message|>", "◁think▷")


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
        try:
            return self._compiled.render(
                messages=messages,
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                **kwargs,
            )
        except jinja2.TemplateError as exc:
            raise UserError(f"chat template raised: {exc}", file=self.name) from exc

    def strip_bos(self, text: str) -> str:
        """Drop a rendered BOS text only when the runtime adds BOS itself."""
        if self.runtime_adds_bos and self.bos_token and text.startswith(self.bos_token):
            return text[len(self.bos_token) :]
        return text


@dataclass(frozen=True)
class TurnMarkers:
    """Role headers and end-of-turn markers, derived by rendering with sentinels."""

    user_header: str
    assistant_header: str
    assistant_opening: str
    """The part of the assistant header that history turns also carry (the generation
    prompt may add more, e.g. an opening ``<think>``)."""
    user_end: str
    assistant_end: str
    preamble: str
    """What the template renders before the first user header when no system message is
    given (its default system prompt, date lines, BOS); recorded per run."""

    def user_stops(self, tpl: ChatTemplate) -> tuple[str, ...]:
        """Stop strings for a generated *user* turn: its end marker, EOS, the other role
        headers, and the family table."""
        cands = [
            self.user_end.strip(),
            *_header_forms(self.assistant_header),
            self.assistant_opening.strip(),
            tpl.eos_token.strip(),
        ]
        cands += FAMILY_STOPS.get(tpl.dialect, ())
        return _dedupe(cands)

    def answer_stops(self, tpl: ChatTemplate) -> tuple[str, ...]:
        """Stop strings for a generated *assistant* answer."""
        cands = [
            self.assistant_end.strip(),
            *_header_forms(self.user_header),
            tpl.eos_token.strip(),
        ]
        fam = tuple(s for s in FAMILY_STOPS.get(tpl.dialect, ()) if s != "<|end|>")
        if tpl.dialect == "gpt-oss":  # <|end|> closes the analysis channel, not the answer
            cands = [c for c in cands if c not in ("<|end|>", "<|start|>user")]
            cands += ["<|return|>", "<|call|>"]
            fam = ()
        return _dedupe(cands + list(fam))


def _header_forms(header: str) -> list[str]:
    """A role header as a stop string, plus its first line (``<|im_start|>assistant``
    when the header also opens a ``<think>`` block)."""
    core = header.strip()
    return [core, core.split("\n")[0].strip()]


def _dedupe(items: list[str]) -> tuple[str, ...]:
    seen: list[str] = []
    for s in items:
        if s and s not in seen:
            seen.append(s)
    return tuple(seen)


def _split_at_header(between: str, header: str) -> tuple[str, str]:
    """Split "user end + assistant opening" at the longest prefix of the assistant header
    found there. A template with no generation prompt (Mistral) has all of it as end."""
    for k in range(len(header), 0, -1):
        at = between.find(header[:k])
        if at >= 0 and (k > 1 or not header):
            return between[:at], between[at:]
    return between, ""


def _between(text: str, start: str, end: str | None = None) -> str:
    i = text.index(start) + len(start)
    if end is None:
        return text[i:]
    return text[i : text.index(end, i)]


def _common_suffix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return a[len(a) - n :] if n else ""


def _strip_leading_markers(text: str, markers: list[str]) -> str:
    changed = True
    while changed:
        changed = False
        for m in sorted((m for m in markers if m), key=len, reverse=True):
            if text.startswith(m) and len(text) > len(m):
                text, changed = text[len(m) :], True
    return text


def derive_markers(tpl: ChatTemplate, **kwargs: Any) -> TurnMarkers:
    """Derive role headers and end markers from the template itself.

    - assistant header: the generation prompt (``add_generation_prompt`` on vs off);
    - user end: the text between a user sentinel and the assistant header after it;
    - assistant end: what follows a final assistant sentinel;
    - user header: the common suffix of "what precedes the first user message" and
      "what sits between an assistant message and the next user message", minus the
      end markers it starts with.
    """
    one = [{"role": "user", "content": SENTINEL}]
    no_gen = tpl.render(one, **kwargs)
    with_gen = tpl.render(one, add_generation_prompt=True, **kwargs)
    if not with_gen.startswith(no_gen):
        raise UserError("template's generation prompt is not an append", file=tpl.name)
    assistant_header = with_gen[len(no_gen) :]
    two = [*one, {"role": "assistant", "content": SENTINEL2}]
    r2 = tpl.render(two, **kwargs)
    between = _between(r2, SENTINEL, SENTINEL2)
    user_end, opening = _split_at_header(between, assistant_header.strip())
    assistant_end = _between(r2, SENTINEL2)
    three = [*two, {"role": "user", "content": SENTINEL3}]
    r3 = tpl.render(three, **kwargs)
    before_first = no_gen[: no_gen.index(SENTINEL)]
    between_turns = _between(r3, SENTINEL2, SENTINEL3)
    ends = [assistant_end, user_end, tpl.eos_token]
    header = _strip_leading_markers(between_turns, ends)
    if not before_first.endswith(header):
        header = _strip_leading_markers(_common_suffix(before_first, between_turns), ends)
    preamble = before_first[: len(before_first) - len(header)] if header else before_first
    return TurnMarkers(
        user_header=header,
        assistant_header=assistant_header,
        assistant_opening=opening,
        user_end=user_end,
        assistant_end=assistant_end,
        preamble=preamble,
    )


@dataclass(frozen=True)
class Reasoning:
    reasoning: str | None
    final: str


def split_reasoning(text: str) -> Reasoning:
    """Split thinking from the final answer, so only the final answer is scored.

    Handles ``<think>…</think>`` (Qwen, DeepSeek, SmolLM3, GLM) and gpt-oss channels.
    A ``</think>`` without its opener is common when the template opened the block in
    the generation prompt.
    """
    if "</think>" in text:
        head, _, tail = text.rpartition("</think>")
        return Reasoning(head.replace("<think>", "", 1).strip(), tail.strip())
    final_tag = "<|channel|>final<|message|>"
    if final_tag in text:
        head, _, tail = text.rpartition(final_tag)
        reasoning = head.replace("<|channel|>analysis<|message|>", "", 1)
        for tok in ("<|end|>", "<|start|>assistant"):
            reasoning = reasoning.replace(tok, "")
        return Reasoning(reasoning.strip() or None, tail.strip())
    return Reasoning(None, text.strip())


def history_message(answer_raw: str, policy: HistoryReasoning) -> Message:
    """The assistant message fed to the user stage, per the history thinking policy.

    ``template`` (default) passes reasoning as ``reasoning_content`` and lets the template
    decide, as in a real conversation; ``strip`` drops it; ``keep`` leaves the raw text.
    """
    parts = split_reasoning(answer_raw)
    if policy == "keep":
        return {"role": "assistant", "content": answer_raw.strip()}
    msg: Message = {"role": "assistant", "content": parts.final}
    if policy == "template" and parts.reasoning:
        msg["reasoning_content"] = parts.reasoning
    return msg


def has_thinking_markup(text: str) -> bool:
    """Detected and labelled in user turns; never removed before judging."""
    return any(m in text for m in THINK_MARKERS)


@dataclass(frozen=True)
class UserPrompt:
    """The exact text the model continues to write a user turn, and what we know of it."""

    prompt: str
    user_header: str
    stop: tuple[str, ...]
    prompt_sha: str
    template_sha: str
    content_survived: bool
    removed: str | None
    """Assistant text the template dropped or rewrote (e.g. stripped thinking), if any."""


def answer_prompt(tpl: ChatTemplate, messages: list[Message], **kwargs: Any) -> str:
    """The prompt for the model's own answer: its template plus the assistant header."""
    return tpl.strip_bos(tpl.render(messages, add_generation_prompt=True, **kwargs))


def user_turn_prompt(
    tpl: ChatTemplate,
    context: list[Message],
    markers: TurnMarkers | None = None,
    **kwargs: Any,
) -> UserPrompt:
    """Render ``context + [user SENTINEL]`` and cut before the sentinel.

    ``context`` ends with the assistant turn. The sentinel must occur exactly once.
    """
    if not context or context[-1]["role"] != "assistant":
        raise UserError("user-turn context must end with an assistant turn", field="messages")
    markers = markers or derive_markers(tpl, **kwargs)
    full = tpl.render([*context, {"role": "user", "content": SENTINEL}], **kwargs)
    count = full.count(SENTINEL)
    if count != 1:
        raise UserError(
            f"user sentinel occurs {count} times in the rendered prompt, expected exactly once",
            file=tpl.name,
        )
    prompt = tpl.strip_bos(full[: full.index(SENTINEL)])
    content = str(context[-1].get("content") or "")
    survived, removed = _survival(prompt, content)
    return UserPrompt(
        prompt=prompt,
        user_header=markers.user_header,
        stop=markers.user_stops(tpl),
        prompt_sha=sha256(prompt),
        template_sha=tpl.sha,
        content_survived=survived,
        removed=removed,
    )


def _survival(prompt: str, content: str) -> tuple[bool, str | None]:
    """Check the assistant text appears verbatim; otherwise say what was removed."""
    if not content or content in prompt:
        return True, None
    stripped = content.strip()
    if stripped in prompt:
        return True, None
    parts = split_reasoning(content)
    if parts.final and parts.final in prompt:
        return False, content.replace(parts.final, "").strip()
    return False, content
