"""Role headers and end-of-turn markers, derived from the template by rendering sentinels.

Nothing here is a per-family table (``FAMILY_STOPS`` only adds to what is derived): the
markers come from diffing renders of small sentinel conversations, so a template we have
never seen gets its own markers. Diffs are cut at token-like boundaries (never inside a
``<|...|>`` or ``[...]`` special token, never mid-word), since a character diff does not
know where tokens end: ``<|developer_end|>`` and ``<|assistant_end|>`` share ``_end|>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from userturn.chat.reasoning import REASONING_CLOSE, REASONING_OPEN, opens_reasoning
from userturn.chat.template import FAMILY_STOPS, ChatTemplate
from userturn.errors import UserError
from userturn.types import Message

SENTINEL = "\u2063USERTURN_SENTINEL_7f3a\u2063"
SENTINEL2 = "\u2063USERTURN_SENTINEL_b21c\u2063"
SENTINEL3 = "\u2063USERTURN_SENTINEL_c94e\u2063"
SYSTEM_SENTINEL = "\u2063USERTURN_SENTINEL_5d07\u2063"

_TRAILING_REASONING = re.compile(
    rf"(?:{REASONING_OPEN.pattern}|{REASONING_CLOSE.pattern}"
    r"|<\|channel\|>\w+<\|message\|>|\s)+$"
)
_CLOSERS, _OPENERS = ">]}", "<[{"


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
    trailer: str = ""
    """What a render without the generation prompt appends at its very end (Phi-3
    appends ``eos_token``); not part of any turn."""
    system_in_new_turn: bool = False
    """The template renders the system message inside the *last* user turn (Mistral):
    in a user-turn prompt that is the generated turn, so the turn would start
    pre-filled. ``system_placement`` decides what to do (``chat.place_system``)."""
    system_joiner: str = "\n\n"
    """What the template puts between folded system text and the user's text."""

    @property
    def opens_reasoning(self) -> bool:
        """The generation prompt leaves a reasoning block open (Qwen3.5 or DeepSeek with
        thinking on): pass it to ``split_reasoning(text, opened=...)``."""
        return opens_reasoning(self.assistant_header)

    def user_stops(self, tpl: ChatTemplate) -> tuple[str, ...]:
        """Stop strings for a generated *user* turn: its end marker, EOS, the other role
        headers (with and without the reasoning markup they open), the assistant's end
        marker (an end of turn in any turn), and the family table."""
        cands = [
            *_header_forms(self.user_end),
            *_header_forms(self.assistant_header),
            *_header_forms(self.assistant_opening),
            tpl.eos_token.strip(),
            self.assistant_end.strip(),
        ]
        cands += FAMILY_STOPS.get(tpl.dialect, ())
        return _dedupe(cands)

    def answer_stops(self, tpl: ChatTemplate) -> tuple[str, ...]:
        """Stop strings for a generated *assistant* answer."""
        cands = [
            *_header_forms(self.assistant_end),
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
    """A role header (or end marker) as a stop string, its first line, and its bare role
    marker without the reasoning markup it opens or closes (``<｜Assistant｜>`` from
    ``<｜Assistant｜><think></think>``): a model writing the role marker has left its turn,
    whatever it writes next. The first line matters for a template with no generation
    prompt whose user end runs into the next header (``<|end|>\n<|assistant|>\n``)."""
    core = header.strip()
    return [core, core.split("\n")[0].strip(), _TRAILING_REASONING.sub("", core)]


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


def _common_prefix_len(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _common_suffix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return a[len(a) - n :] if n else ""


def _unit_suffix(a: str, b: str) -> str:
    """The common suffix of ``a`` and ``b``, starting at a token-like boundary: a
    partially shared special token (``_end|>`` of ``<|developer_end|>`` and
    ``<|assistant_end|>``) or word is dropped from its front."""
    suf = _common_suffix(a, b)
    close = next((i for i, c in enumerate(suf) if c in _CLOSERS), -1)
    opened = next((i for i, c in enumerate(suf) if c in _OPENERS), len(suf))
    if 0 <= close < opened:
        suf = suf[close + 1 :]
    n = len(suf)
    if suf[:1].isalnum() and any(len(s) > n and s[-n - 1].isalnum() for s in (a, b)):
        suf = suf[next((i for i, c in enumerate(suf) if not c.isalnum()), n) :]
    return suf


def _strip_leading_markers(text: str, markers: list[str]) -> str:
    changed = True
    while changed:
        changed = False
        for m in sorted((m for m in markers if m), key=len, reverse=True):
            if text.startswith(m) and len(text) > len(m):
                text, changed = text[len(m) :], True
    return text


def _is_boundary(text: str, k: int, eos: str) -> bool:
    """A place a trailer can start: at EOS, after whitespace, or after a special token."""
    return bool(eos and text.startswith(eos, k)) or text[k - 1].isspace() or text[k - 1] in _CLOSERS


def _generation_prompt(tpl: ChatTemplate, no_gen: str, with_gen: str) -> tuple[str, str]:
    """(generation prompt, trailer). Most templates append the generation prompt; some
    (Phi-3) end a non-generation render with a trailer (``eos_token``) that the
    generation prompt replaces. The split is at a token-like boundary after the user turn."""
    if with_gen.startswith(no_gen):
        return with_gen[len(no_gen) :], ""
    floor = no_gen.index(SENTINEL) + len(SENTINEL)
    k = _common_prefix_len(no_gen, with_gen)
    while k > floor and not _is_boundary(no_gen, k, tpl.eos_token):
        k -= 1
    if k <= floor:
        raise UserError(
            "template's generation prompt is not an append: add_generation_prompt changes "
            "the conversation's own text",
            file=tpl.name,
        )
    return with_gen[k:], no_gen[k:]


def _untrail(tpl: ChatTemplate, text: str, trailer: str) -> str:
    if not trailer:
        return text
    if not text.endswith(trailer):
        raise UserError(
            f"template ends a render with {trailer!r} only sometimes; cannot tell the "
            "generation prompt from the conversation",
            file=tpl.name,
        )
    return text[: -len(trailer)]


def _user_header(before_first: str, between_turns: str, ends: list[str]) -> str:
    """The user header: what precedes a user message both at the start (after the
    preamble) and after an assistant turn (after the assistant's end marker)."""
    header = _strip_leading_markers(between_turns, ends)
    if header and before_first.endswith(header):
        return header
    return _strip_leading_markers(_unit_suffix(before_first, between_turns), ends)


def _system_placement(tpl: ChatTemplate, **kwargs: Any) -> tuple[bool, str]:
    """Whether the template puts system text after the last assistant turn (into the
    last user turn), and what it joins system and user text with when it folds them."""
    sys_msg: Message = {"role": "system", "content": SYSTEM_SENTINEL}
    user: Message = {"role": "user", "content": SENTINEL}
    conv = [sys_msg, user, {"role": "assistant", "content": SENTINEL2}]
    try:
        text = tpl.render([*conv, {"role": "user", "content": SENTINEL3}], **kwargs)
        first = tpl.render([sys_msg, user], **kwargs)
    except UserError:  # a template that refuses system messages (Gemma-2) folds nothing
        return False, "\n\n"
    if SYSTEM_SENTINEL not in text or SENTINEL2 not in text:
        return False, "\n\n"
    return text.rindex(SYSTEM_SENTINEL) > text.index(SENTINEL2), _system_joiner(first)


def _system_joiner(first: str) -> str:
    """The whitespace between system and user text in a one-turn render that folds
    them together (Mistral's ``"\\n\\n"``), else a blank line."""
    if SYSTEM_SENTINEL not in first or SENTINEL not in first:
        return "\n\n"
    gap = _between(first, SYSTEM_SENTINEL)
    gap = gap[: gap.find(SENTINEL)] if SENTINEL in gap else ""
    return gap if gap and not gap.strip() else "\n\n"


def derive_markers(tpl: ChatTemplate, **kwargs: Any) -> TurnMarkers:
    """Derive role headers and end markers from the template itself (see
    :func:`_derive_markers`); a template whose output leaves out a message (an empty
    file, or one that drops user turns) can't give a user-turn prompt: one line."""
    try:
        return _derive_markers(tpl, **kwargs)
    except ValueError as exc:  # str.index: a sentinel message is missing from the output
        raise UserError(
            "the chat template leaves messages out of its output (a test conversation's "
            "user or assistant turn is missing), so no user-turn prompt can be derived",
            file=tpl.name,
        ) from exc


def _derive_markers(tpl: ChatTemplate, **kwargs: Any) -> TurnMarkers:
    """Derive role headers and end markers from the template itself.

    - assistant header: the generation prompt (``add_generation_prompt`` on vs off);
    - user end: the text between a user sentinel and the assistant header after it;
    - assistant end: what follows a final assistant sentinel, or, where the template
      closes an assistant turn only when a user turn follows (Apertus, Hunyuan), what
      sits between the assistant message and the next user header;
    - user header: what precedes the first user message and also follows an assistant
      turn, minus the end markers it starts with.
    """
    one: list[Message] = [{"role": "user", "content": SENTINEL}]
    no_gen = tpl.render(one, **kwargs)
    assistant_header, trailer = _generation_prompt(
        tpl, no_gen, tpl.render(one, add_generation_prompt=True, **kwargs)
    )
    two = [*one, {"role": "assistant", "content": SENTINEL2}]
    r2 = _untrail(tpl, tpl.render(two, **kwargs), trailer)
    user_end, opening = _split_at_header(
        _between(r2, SENTINEL, SENTINEL2), assistant_header.strip()
    )
    final_end = _between(r2, SENTINEL2)
    r3 = _untrail(
        tpl, tpl.render([*two, {"role": "user", "content": SENTINEL3}], **kwargs), trailer
    )
    before_first = no_gen[: no_gen.index(SENTINEL)]
    between_turns = _between(r3, SENTINEL2, SENTINEL3)
    header = _user_header(before_first, between_turns, [final_end, user_end, tpl.eos_token])
    turn_end = between_turns[: len(between_turns) - len(header)]
    folds, joiner = _system_placement(tpl, **kwargs)
    return TurnMarkers(
        user_header=header,
        assistant_header=assistant_header,
        assistant_opening=opening,
        user_end=user_end,
        assistant_end=final_end or turn_end,
        preamble=before_first[: len(before_first) - len(header)] if header else before_first,
        trailer=trailer,
        system_in_new_turn=folds,
        system_joiner=joiner,
    )
