"""What a worker yields to the driver, one event per stored record.

In a module of their own so that the worker, the probes' stages and the executors all
use them without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from userturn.rundir.records import AnswerRecord, LikelihoodRecord, UserTurnRecord
from userturn.types import Item, Judgment


@dataclass(frozen=True)
class AnswerEvent:
    record: AnswerRecord
    item: Item
    generated: bool
    """False when the answer was already stored or is given by the dataset."""
    reply: bool = False
    """A later assistant turn of a rollout, not an item's first answer."""


@dataclass(frozen=True)
class UserEvent:
    record: UserTurnRecord
    generated: bool
    calls: int = 1
    """Model calls behind the record (a best-of turn samples several candidates)."""
    judge_calls: int = 0
    """Judge calls spent choosing among the candidates (their verdicts live on the
    record, not in the judgments table)."""


@dataclass(frozen=True)
class LikelihoodEvent:
    record: LikelihoodRecord
    generated: bool


@dataclass(frozen=True)
class JudgmentEvent:
    """A verdict a stage needed while it worked (a rollout's steering judge)."""

    key: str
    judgment: Judgment


Event = AnswerEvent | UserEvent | LikelihoodEvent | JudgmentEvent
