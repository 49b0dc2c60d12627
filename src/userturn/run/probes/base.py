"""What a probe is to the driver: a plan, work units, the records they yield, and cells.

A probe is a small object built from the run's config. The driver asks it to check the
plan, count the work for progress, read from the store what the work may reuse
(:class:`Known`), and build a :class:`Stage` on each worker (in-process, or on a Ray
actor), which turns a chunk of items into events; the driver stores every event, so it
is the store's only writer whichever executor ran the work. Cells need no hook here:
analysis builds each probe's typed cell from the records the probe wrote.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol

from userturn.config import RunConfig
from userturn.datasets import Dataset
from userturn.judges import Judge
from userturn.run.events import AnswerEvent, Event
from userturn.rundir.records import AnswerRecord, UserTurnRecord
from userturn.rundir.store import Store
from userturn.types import Item, Judgment
from userturn.types import Probe as ProbeName

if TYPE_CHECKING:
    from userturn.run.worker import ItemWorker


@dataclass
class Job:
    """One dataset's selected items: the unit of work a probe counts and an executor runs."""

    dataset: Dataset
    items: list[Item]


@dataclass
class Known:
    """What the store already holds that a stage may reuse instead of regenerating.

    Read by the driver before the work starts and handed to every worker (a Ray actor
    gets a copy), so a stage never reads the store either."""

    answers: dict[str, AnswerRecord]
    done: set[str]
    """Keys of the stored user-turn and likelihood records."""
    turns: dict[str, UserTurnRecord] = field(default_factory=dict)
    """Stored records a stage continues from (a rollout's earlier turns), by key."""
    verdicts: dict[str, list[Judgment]] = field(default_factory=dict)
    """Stored judgments a stage steers by (a rollout's early stop and best-of)."""


class Stage(Protocol):
    """A probe's work on one worker: chunks of items in, events out."""

    def process(
        self, items: list[Item], dataset: Dataset, known: Known, pool: list[Item]
    ) -> Iterator[Event]:
        """The events of one chunk; ``pool`` is the dataset's selected items."""
        ...

    def close(self) -> None: ...


class Probe(Protocol):
    """One probe, as the driver and the executors run it."""

    name: ClassVar[ProbeName]
    command: ClassVar[str]
    """The writer the run directory's lock names."""
    unit: ClassVar[str]
    """What the progress bar counts (``user turns``, ``contexts scored``)."""
    estimates_speed: ClassVar[bool]
    """Whether a one-model run's end-to-end speed feeds the next run's time estimate
    (which counts answers and user turns, as this probe makes them)."""
    cfg: RunConfig

    def check(self) -> None:
        """Refuse a plan the probe cannot run, before any work."""
        ...

    def check_items(self, spec: str, items: list[Item]) -> None:
        """Refuse a dataset the probe has nothing to measure in."""
        ...

    def planned(self, jobs: list[Job]) -> int:
        """The records the plan asks for (the progress bar's total)."""
        ...

    def known(self, store: Store) -> Known: ...

    def stage(self, worker: ItemWorker) -> Stage: ...

    def judged_after(self, judges: list[Judge]) -> list[Judge]:
        """The judges the driver runs over the stored turns once the work is done."""
        ...

    def judges_reference(self) -> bool:
        """Whether ``--judge-reference`` adds the real next user turns as rows."""
        ...


class ProbeBase:
    """Defaults the probes share: every judge runs after the work, nothing to refuse."""

    cfg: RunConfig

    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg

    def check(self) -> None:
        pass

    def check_items(self, spec: str, items: list[Item]) -> None:
        pass

    def known(self, store: Store) -> Known:
        return Known({a.key: a for a in store.answers()}, _done(store))

    def judged_after(self, judges: list[Judge]) -> list[Judge]:
        return judges

    def judges_reference(self) -> bool:
        return True


def _done(store: Store) -> set[str]:
    return store.user_turn_keys() | store.likelihood_keys()


class OneTurnStage:
    """A chunk's answers first (the driver stores them as they come), then what the
    probe makes of them; for llama.cpp a chunk is one item, so the next prompt extends
    the answer still in the KV cache."""

    def __init__(self, worker: ItemWorker) -> None:
        self.worker = worker

    def process(
        self, items: list[Item], dataset: Dataset, known: Known, pool: list[Item]
    ) -> Iterator[Event]:
        answers = list(self.worker.answers(items, dataset, known.answers))
        yield from answers
        yield from self.after(answers, known, pool)

    def after(self, answers: list[AnswerEvent], known: Known, pool: list[Item]) -> Iterator[Event]:
        raise NotImplementedError

    def close(self) -> None:
        pass
