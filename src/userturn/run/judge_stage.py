"""The judge stage: add judgments to stored user turns, without regenerating anything.

Used by ``userturn run`` (for the user turns it produced) and ``userturn judge --run``
(for every user turn in a store). A judgment from an older judge version is redone;
with ``retry_failed`` so is one that did not come back ok (an outage is not permanent).
Several judges coexist per user turn.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from userturn.judges import Judge
from userturn.rundir.records import UserTurnRecord
from userturn.rundir.store import Store
from userturn.types import JudgeInput

log = logging.getLogger(__name__)
BATCH = 256
FAILED_SHARE = 0.5
"""A run whose judge failed on more than this share of the turns it judged fails."""


def judge_input(turn: UserTurnRecord) -> JudgeInput:
    """Only the context and the candidate turn: no model, dataset, T or reference."""
    return JudgeInput(id=turn.key, messages=turn.messages, user_turn=turn.user_turn)


def pending(
    store: Store, judge: Judge, turns: Iterable[UserTurnRecord], retry_failed: bool = False
) -> list[UserTurnRecord]:
    """Turns without a current judgment by ``judge`` (or with a failed one, if asked)."""
    states = store.judgment_states(judge.id)

    def current(key: str) -> bool:
        version, status = states.get(key, ("", ""))
        return version == judge.version and (status == "ok" or not retry_failed)

    return [t for t in turns if not current(t.key)]


@dataclass
class JudgeTally:
    """What one judge stage did, per judge: written, ok and failed judgments, LLM calls."""

    written: int = 0
    calls: int = 0
    failed: dict[str, int] = field(default_factory=dict)
    judged: dict[str, int] = field(default_factory=dict)

    def failing(self) -> list[str]:
        """Judges that failed on most of what they judged in this stage."""
        return [j for j, n in self.judged.items() if n and self.failed.get(j, 0) / n > FAILED_SHARE]


def judge_rows(
    store: Store,
    judges: list[Judge],
    turns: list[UserTurnRecord],
    advance: Callable[[int], None] | None = None,
    retry_failed: bool = False,
) -> JudgeTally:
    """Judge ``turns`` with every judge, storing each verdict as it arrives: a kill in
    the middle of a batch loses only the calls still in flight, never an answered one."""
    tally = JudgeTally()
    for judge in judges:
        todo = pending(store, judge, turns, retry_failed)
        for start in range(0, len(todo), BATCH):
            batch = todo[start : start + BATCH]
            seen: set[int] = set()
            for i, v in judge.judge_each([judge_input(t) for t in batch]):
                store.put_judgment(batch[i].key, replace(v, judge=judge.id, version=judge.version))
                seen.add(i)
                tally.calls += int(v.usage.get("calls", 0))
                tally.failed[judge.id] = tally.failed.get(judge.id, 0) + (v.status != "ok")
                tally.judged[judge.id] = tally.judged.get(judge.id, 0) + 1
                tally.written += 1
                if advance:
                    advance(1)
            assert len(seen) == len(batch), f"judge {judge.id} dropped outputs"
    return tally
