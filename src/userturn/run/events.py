"""What a worker yields to the driver, one event per stored record.

In a module of their own so that the worker and the probe stages it calls (the
likelihood stage) both use them without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from userturn.rundir.records import AnswerRecord, LikelihoodRecord, UserTurnRecord
from userturn.types import Item


@dataclass(frozen=True)
class AnswerEvent:
    record: AnswerRecord
    item: Item
    generated: bool
    """False when the answer was already stored or is given by the dataset."""


@dataclass(frozen=True)
class UserEvent:
    record: UserTurnRecord
    generated: bool


@dataclass(frozen=True)
class LikelihoodEvent:
    record: LikelihoodRecord
    generated: bool


Event = AnswerEvent | UserEvent | LikelihoodEvent
