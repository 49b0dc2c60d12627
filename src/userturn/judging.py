"""The judge stage: add judgments to stored user turns, without regenerating anything.

Used by ``userturn run`` (for the user turns it produced) and ``userturn judge --run``
(for every user turn in a store). A judgment from an older rubric version is redone;
several judges coexist per user turn.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from userturn.judges import Judge
from userturn.store import Store, UserTurnRow
from userturn.types import JudgeInput

log = logging.getLogger(__name__)
BATCH = 256


def judge_input(row: UserTurnRow) -> JudgeInput:
    """Only the context and the candidate turn: no model, dataset, T or reference."""
    return JudgeInput(
        id=row.key,
        messages=tuple(row.data["messages"]),
        user_turn=str(row.data.get("user_turn", "")),
    )


def pending(store: Store, judge: Judge, rows: Iterable[UserTurnRow]) -> list[UserTurnRow]:
    current = {k for k, v in _versions(store, judge.id).items() if v == judge.version}
    return [r for r in rows if r.key not in current]


def _versions(store: Store, judge_id: str) -> dict[str, str]:
    cur = store.conn.execute(
        "SELECT user_turn_key, json_extract(data, '$.version') FROM judgments WHERE judge=?",
        (judge_id,),
    )
    return {k: str(v) for k, v in cur}


def judge_rows(
    store: Store,
    judges: list[Judge],
    rows: list[UserTurnRow],
    advance: Callable[[int], None] | None = None,
) -> tuple[int, int]:
    """Judge ``rows`` with every judge, storing as batches finish. Returns
    (judgments written, LLM calls made)."""
    written = calls = 0
    for judge in judges:
        todo = pending(store, judge, rows)
        for start in range(0, len(todo), BATCH):
            batch = todo[start : start + BATCH]
            verdicts = judge.judge([judge_input(r) for r in batch])
            assert len(verdicts) == len(batch), f"judge {judge.id} dropped outputs"
            for row, v in zip(batch, verdicts, strict=True):
                store.put_judgment(
                    row.key, judge.id, {**v.to_json(), "version": judge.version, "usage": v.usage}
                )
                calls += int(v.usage.get("calls", 0))
            written += len(batch)
            if advance:
                advance(len(batch))
    return written, calls
