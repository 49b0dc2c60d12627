"""The two prompts: the answer prompt, and the user-turn prompt (the heart of userturn).

Why sentinels: the user-turn prompt is "the conversation, then the user header". Asking
the template for ``add_generation_prompt`` only ever opens an assistant header, and
``continue_final_message`` with an empty user message behaves differently across
transformers versions. Rendering ``[..., user SENTINEL]`` and cutting before the sentinel
gives the header exactly as the template writes it.

Never a pre-filled user turn: if the text between the user header and the sentinel is
not empty (Mistral puts the system message into the last user turn), the model would
continue words we put in the user's mouth. ``system_placement`` says what to do:

- ``template`` (default): render exactly what the template renders, and refuse (one
  ``UserError`` naming the template) where that pre-fills the generated turn;
- ``first-turn``: where the template would move the system message into the new turn,
  fold its text into the *first* user message instead (joined as the template joins
  them), in the answer prompt and the user-turn prompt alike, so the system text sits
  where the conversation started and the generated turn opens empty. Templates that
  keep the system message in place render unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from userturn.chat.markers import SENTINEL, TurnMarkers, derive_markers
from userturn.chat.reasoning import split_reasoning
from userturn.chat.template import ChatTemplate, sha256
from userturn.errors import UserError
from userturn.types import Message

SystemPlacement = Literal["template", "first-turn"]
SYSTEM_PLACEMENTS: tuple[str, ...] = get_args(SystemPlacement)


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
    system_folded: bool = False
    """The system message was folded into the first user turn (``first-turn`` policy)."""


def place_system(
    messages: list[Message], markers: TurnMarkers, policy: SystemPlacement
) -> tuple[list[Message], bool]:
    """Apply the ``system_placement`` policy: (messages to render, whether folded).

    Only a leading system message, and only for a template that would otherwise render
    it into the last user turn, is folded into the first user message.
    """
    if policy not in SYSTEM_PLACEMENTS:
        raise UserError(
            f"expected one of {', '.join(SYSTEM_PLACEMENTS)}, got {policy!r}",
            field="system_placement",
        )
    if policy == "template" or not markers.system_in_new_turn:
        return messages, False
    if not messages or messages[0]["role"] != "system":
        return messages, False
    rest = [dict(m) for m in messages[1:]]
    first = next((m for m in rest if m["role"] == "user"), None)
    system, content = messages[0].get("content"), None if first is None else first["content"]
    if first is None or not isinstance(system, str) or not isinstance(content, str):
        raise UserError(
            "system_placement 'first-turn' needs a text system message and a text user "
            "message before the assistant turn to fold it into",
            field="system_placement",
        )
    first["content"] = system + markers.system_joiner + content
    return rest, True


def answer_prompt(
    tpl: ChatTemplate,
    messages: list[Message],
    *,
    system_placement: SystemPlacement = "template",
    markers: TurnMarkers | None = None,
    **kwargs: Any,
) -> str:
    """The prompt for the model's own answer: its template plus the assistant header.

    Under ``first-turn`` the system message is placed as in the user-turn prompt, so the
    user-turn prompt still extends the answer prompt (prefix reuse)."""
    if system_placement != "template" and messages and messages[0]["role"] == "system":
        messages, _ = place_system(
            messages, markers or derive_markers(tpl, **kwargs), system_placement
        )
    return tpl.strip_bos(tpl.render(messages, add_generation_prompt=True, **kwargs))


def user_turn_prompt(
    tpl: ChatTemplate,
    context: list[Message],
    markers: TurnMarkers | None = None,
    *,
    system_placement: SystemPlacement = "template",
    **kwargs: Any,
) -> UserPrompt:
    """Render ``context + [user SENTINEL]`` and cut before the sentinel.

    ``context`` ends with the assistant turn. The sentinel must occur exactly once, and
    the prompt must end with the user header (nothing pre-filled in the new turn).
    """
    if not context or context[-1]["role"] != "assistant":
        raise UserError("user-turn context must end with an assistant turn", field="messages")
    markers = markers or derive_markers(tpl, **kwargs)
    messages, folded = place_system(context, markers, system_placement)
    full = tpl.render([*messages, {"role": "user", "content": SENTINEL}], **kwargs)
    count = full.count(SENTINEL)
    if count != 1:
        raise UserError(
            f"user sentinel occurs {count} times in the rendered prompt, expected exactly once",
            file=tpl.name,
        )
    raw = full[: full.index(SENTINEL)]
    _refuse_prefill(tpl, raw, markers, messages)
    prompt = tpl.strip_bos(raw)
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
        system_folded=folded,
    )


def _refuse_prefill(
    tpl: ChatTemplate, raw: str, markers: TurnMarkers, messages: list[Message]
) -> None:
    """The generated turn must open empty: refuse a prompt that does not end with the
    user header, saying what the template put in the user's mouth."""
    header = markers.user_header
    if raw.endswith(header):
        return
    if markers.system_in_new_turn and messages[0]["role"] == "system":
        raise UserError(
            "the template renders the system message inside the generated user turn, "
            "which would pre-fill it; set system_placement to 'first-turn' to fold it "
            "into the first user turn, or drop the system message",
            file=tpl.name,
            field="system_placement",
        )
    at = raw.rfind(header) + len(header) if header in raw else max(0, len(raw) - 80)
    raise UserError(
        f"the template pre-fills the generated user turn with {raw[at:][:80]!r} after "
        f"the user header {header!r}; refusing to put words in the user's mouth",
        file=tpl.name,
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
