"""Reasoning markup: splitting thinking from the final answer, honestly.

Only the final answer is scored and shown to the user stage, so an answer cut off by
the token limit *inside* its reasoning must not become "the answer": it has none.
``split_reasoning`` says so (``complete=False``, ``final == ""``); ``answer_finish``
turns that into the record's ``length_in_reasoning``.

Reasoning blocks come in several spellings: ``<think>…</think>`` (Qwen, DeepSeek,
SmolLM3, GLM), namespaced tags (Hunyuan's ``<think:opensource>``, Seed's
``<seed:think>``), ``◁think▷`` (Kimi), ``[THINK]`` (Magistral), Apertus's
``<|inner_prefix|>…<|inner_suffix|>``, Gemma 4's ``<|channel>thought…<channel|>``, and
gpt-oss channels. The template may open the
block in the generation prompt, so the generated text then starts inside it
(``opened=True``; ``TurnMarkers.opens_reasoning`` tells).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from userturn.types import AnswerFinish, Finish, HistoryReasoning, Message

THINK_MARKERS = ("<think>", "</think>", "<|channel|>", "<|message|>", "◁think▷")
_TAG = r"(?:[\w.-]+:)?think(?::[\w.-]+)?"
REASONING_OPEN = re.compile(rf"<{_TAG}>|◁think▷|\[THINK\]|<\|inner_prefix\|>|<\|channel>thought")
REASONING_CLOSE = re.compile(rf"</{_TAG}>|◁/think▷|\[/THINK\]|<\|inner_suffix\|>|<channel\|>")
_CHANNEL = re.compile(r"<\|channel\|>(\w+)(?:[^<]*)<\|message\|>")
_FINAL = "<|channel|>final<|message|>"
_ANALYSIS = "<|channel|>analysis<|message|>"
_OSS_FRAMING = ("<|end|>", "<|start|>assistant")


@dataclass(frozen=True)
class Reasoning:
    reasoning: str | None
    final: str
    complete: bool = True
    """False when the text stops inside an open reasoning block: ``final`` is then ""."""


def opens_reasoning(generation_prompt: str) -> bool:
    """Whether a generation prompt leaves a reasoning block open (its last reasoning tag
    is an opener), so the model's text starts inside the block."""
    tags = [(m.end(), True) for m in REASONING_OPEN.finditer(generation_prompt)]
    tags += [(m.end(), False) for m in REASONING_CLOSE.finditer(generation_prompt)]
    tags += [(m.end(), m.group(1) == "analysis") for m in _CHANNEL.finditer(generation_prompt)]
    return bool(tags) and max(tags)[1]


def split_reasoning(text: str, opened: bool = False) -> Reasoning:
    """Split thinking from the final answer, so only the final answer is scored.

    ``opened``: the generation prompt opened the reasoning block (the text has no
    opener of its own). With no closing marker, the text is all reasoning: the answer
    is incomplete and its final answer is empty, never the partial reasoning.
    """
    if _ANALYSIS in text or _FINAL in text:
        return _split_channels(text)
    closes = list(REASONING_CLOSE.finditer(text))
    if closes:
        head, tail = text[: closes[-1].start()], text[closes[-1].end() :]
        return Reasoning(REASONING_OPEN.sub("", head, count=1).strip(), tail.strip())
    start = REASONING_OPEN.match(text.lstrip())
    if opened or start:
        body = text.lstrip()[start.end() :] if start else text
        return Reasoning(body.strip(), "", complete=False)
    return Reasoning(None, text.strip())


def _split_channels(text: str) -> Reasoning:
    """gpt-oss: ``analysis`` is reasoning, ``final`` the answer; none yet means the
    text stopped in the analysis channel."""
    head, found, tail = text.rpartition(_FINAL)
    if not found:
        head, tail = text, ""
    reasoning = head.replace(_ANALYSIS, "", 1)
    for tok in _OSS_FRAMING:
        reasoning = reasoning.replace(tok, "")
    if not found:
        return Reasoning(reasoning.strip(), "", complete=False)
    return Reasoning(reasoning.strip() or None, tail.strip())


def answer_finish(finish: Finish, parts: Reasoning) -> AnswerFinish:
    """The answer record's finish: ``length_in_reasoning`` when the token limit cut the
    text inside its reasoning (no final answer at all), else the backend's finish."""
    if finish == "length" and not parts.complete:
        return "length_in_reasoning"
    return finish


def history_message(answer_raw: str, policy: HistoryReasoning, opened: bool = False) -> Message:
    """The assistant message fed to the user stage, per the history thinking policy.

    ``template`` (default) passes reasoning as ``reasoning_content`` and lets the template
    decide, as in a real conversation; ``strip`` drops it; ``keep`` leaves the raw text.
    An answer cut inside its reasoning has an empty final answer under ``template`` and
    ``strip``: the model never answered.
    """
    parts = split_reasoning(answer_raw, opened)
    if policy == "keep":
        return {"role": "assistant", "content": answer_raw.strip()}
    msg: Message = {"role": "assistant", "content": parts.final}
    if policy == "template" and parts.reasoning:
        msg["reasoning_content"] = parts.reasoning
    return msg


def has_thinking_markup(text: str) -> bool:
    """Detected and labelled in user turns; never removed before judging."""
    if any(m in text for m in THINK_MARKERS):
        return True
    return bool(REASONING_OPEN.search(text) or REASONING_CLOSE.search(text))
