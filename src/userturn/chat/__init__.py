"""Chat templates: what a model's own template shows it, and the user-turn prompt.

The probe must show a model exactly what its own template would show it, then open a
*user* header and let the same weights continue. Rendering follows HF
``apply_chat_template`` (``template``); role headers and end markers are derived from the
template (``markers``); reasoning is split off honestly (``reasoning``); ``prompts``
builds the answer prompt and the user-turn prompt. The package exports all of it, so
``from userturn.chat import ...`` is the one import callers need.
"""

from __future__ import annotations

from userturn.chat.markers import SENTINEL, SENTINEL2, SENTINEL3, TurnMarkers, derive_markers
from userturn.chat.prompts import (
    SYSTEM_PLACEMENTS,
    SystemPlacement,
    UserPrompt,
    answer_prompt,
    place_system,
    user_turn_prompt,
)
from userturn.chat.reasoning import (
    THINK_MARKERS,
    Reasoning,
    answer_finish,
    has_thinking_markup,
    history_message,
    split_reasoning,
)
from userturn.chat.template import FAMILY_STOPS, ChatTemplate, sha256

__all__ = [
    "FAMILY_STOPS",
    "SENTINEL",
    "SENTINEL2",
    "SENTINEL3",
    "SYSTEM_PLACEMENTS",
    "THINK_MARKERS",
    "ChatTemplate",
    "Reasoning",
    "SystemPlacement",
    "TurnMarkers",
    "UserPrompt",
    "answer_finish",
    "answer_prompt",
    "derive_markers",
    "has_thinking_markup",
    "history_message",
    "place_system",
    "sha256",
    "split_reasoning",
    "user_turn_prompt",
]
