"""Judges, loaded lazily through the one registry (``userturn.registry.JUDGES``):
``offline`` (the default), ``rules``, ``llm:<model spec>``, ``openai:MODEL`` (shorthand
for ``llm:openai:MODEL``) and ``cascade:<model spec>``."""

from __future__ import annotations

from userturn import registry
from userturn.judges.base import Judge


def normalize_judge_spec(raw: str) -> str:
    """Canonical judge name: ``openai:M`` becomes ``llm:openai:M``."""
    raw = raw.strip()
    return "llm:" + raw if raw.startswith("openai:") else raw


def load_judge(raw: str, **kwargs: object) -> Judge:
    plugin, spec = registry.judge_spec(raw)
    judge: Judge = plugin.load()(spec, **kwargs)
    return judge


__all__ = ["Judge", "load_judge", "normalize_judge_spec"]
