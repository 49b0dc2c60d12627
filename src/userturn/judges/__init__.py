"""Judges, registered lazily: ``rules``, ``llm:<model spec>``, ``openai:MODEL``
(shorthand for ``llm:openai:MODEL``), ``cascade:<llm judge spec>``."""

from __future__ import annotations

import importlib
import importlib.util

from userturn.errors import UserError
from userturn.judges.base import Judge
from userturn.spec import Spec, parse_spec

JUDGES: dict[str, str] = {
    "rules": "userturn.judges.rules:RulesJudge",
    "llm": "userturn.judges.llm:LLMJudge",
    "cascade": "userturn.judges.cascade:CascadeJudge",
}


def normalize_judge_spec(raw: str) -> str:
    """Canonical judge name: ``openai:M`` becomes ``llm:openai:M``."""
    raw = raw.strip()
    if raw.startswith("openai:"):
        return "llm:" + raw
    return raw


def load_judge(raw: str, **kwargs: object) -> Judge:
    raw = normalize_judge_spec(raw)
    kind = raw.split(":", 1)[0].split("?", 1)[0]
    if kind not in JUDGES or importlib.util.find_spec(JUDGES[kind].partition(":")[0]) is None:
        known = [
            k
            for k, t in JUDGES.items()
            if importlib.util.find_spec(t.partition(":")[0]) is not None
        ]
        raise UserError(f"unknown judge {raw!r} (known: {', '.join(known)})", field="judge")
    spec = Spec(kind=kind, target=raw.partition(":")[2], raw=raw)
    if kind == "rules":
        spec = parse_spec(raw, what="judge")
        spec = Spec(kind="rules", target="", options=spec.options, raw=raw)
    mod_name, _, cls_name = JUDGES[kind].partition(":")
    cls = getattr(importlib.import_module(mod_name), cls_name)
    judge: Judge = cls(spec, **kwargs)
    return judge


__all__ = ["JUDGES", "Judge", "load_judge", "normalize_judge_spec"]
