"""Chat-format conversations from a run, for training and for reading.

``userturn export conversations`` writes one ``{"messages": [...]}`` line per
conversation, the format ``datasets.load_dataset("json")`` and ``userturn train sft``
read. A rollout gives its whole conversation (its last turn's context plus that turn);
a one-turn probe gives each context plus its user turn. With ``only_genuine``, a rollout
is kept up to (not including) its first user turn the judge calls degenerate, and one
with no genuine turn at all is dropped; a one-turn probe keeps its genuine turns only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from userturn.rundir.records import UserTurnRecord
from userturn.rundir.store import Store
from userturn.types import CONVERSATION_PROBES, Judgment


@dataclass(frozen=True)
class Exported:
    lines: list[dict[str, Any]]
    conversations: int
    dropped: int


def export_conversations(store: Store, judge: str | None, only_genuine: bool) -> Exported:
    verdicts = _verdicts(store, judge)
    turns = [t for t in store.user_turns() if t.model != "human-reference"]
    groups: dict[tuple[Any, ...], list[UserTurnRecord]] = {}
    for t in turns:
        key = _conversation(t)
        groups.setdefault(key, []).append(t)
    lines: list[dict[str, Any]] = []
    for group in groups.values():
        group.sort(key=lambda t: t.turn)
        kept = _genuine_prefix(group, verdicts) if only_genuine else group
        if kept:
            lines.append(_line(kept, verdicts))
    return Exported(lines, len(groups), len(groups) - len(lines))


def _conversation(t: UserTurnRecord) -> tuple[Any, ...]:
    """Rollout turns of one conversation share a key; every one-turn record is its own."""
    if t.probe in CONVERSATION_PROBES:
        return (t.model, t.dataset, t.config, t.item_id, t.temperature, t.sample)
    return (t.key,)


def _verdicts(store: Store, judge: str | None) -> dict[str, Judgment]:
    if judge is None:
        return {}
    return {k: j for k, js in store.judgments().items() for j in js if j.judge == judge}


def _genuine(t: UserTurnRecord, verdicts: dict[str, Judgment]) -> bool:
    v = verdicts.get(t.key)
    return v is not None and v.status == "ok" and v.genuine is True


def _genuine_prefix(
    group: list[UserTurnRecord], verdicts: dict[str, Judgment]
) -> list[UserTurnRecord]:
    kept = []
    for t in group:
        if not _genuine(t, verdicts):
            break
        kept.append(t)
    return kept


def _line(group: list[UserTurnRecord], verdicts: dict[str, Judgment]) -> dict[str, Any]:
    last = group[-1]
    messages = [*last.messages, {"role": "user", "content": last.user_turn.strip()}]
    return {
        "messages": messages,
        "meta": {
            "model": last.model,
            "dataset": last.dataset,
            "item_id": last.item_id,
            "config": last.config,
            "probe": last.probe,
            "temperature": last.temperature,
            "sample": last.sample,
            "user_turns": [t.key for t in group],
            "genuine": [_genuine(t, verdicts) for t in group] if verdicts else None,
        },
    }
