"""The likelihood probe (``userturn likelihood``): scores, no sampling, no judge.

Each context with a real next user turn gets its candidates scored under every condition
(``run.likelihood_stage``); contexts without one are skipped, and a dataset with none is
refused before any work.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar

from userturn.errors import UserError
from userturn.run.events import AnswerEvent, Event
from userturn.run.likelihood_stage import likelihood_events
from userturn.run.probes.base import Known, OneTurnStage, ProbeBase
from userturn.types import Item
from userturn.types import Probe as ProbeName

if TYPE_CHECKING:
    from userturn.run.probes.base import Job
    from userturn.run.worker import ItemWorker


class LikelihoodProbe(ProbeBase):
    name: ClassVar[ProbeName] = "likelihood"
    command: ClassVar[str] = "run"
    unit: ClassVar[str] = "contexts scored"
    estimates_speed: ClassVar[bool] = False

    def check_items(self, spec: str, items: list[Item]) -> None:
        if not any(it.reference_turn for it in items):
            raise UserError(
                f"dataset {spec!r} has no real next user turn to score: the likelihood "
                "probe needs healthbench, sharegpt, mtbench, coval or jsonl rows with "
                "reference_turn",
                field="dataset",
            )

    def planned(self, jobs: list[Job]) -> int:
        """Only contexts with a real next turn are scored."""
        scored = sum(1 for j in jobs for it in j.items if it.reference_turn)
        return scored * len(self.cfg.perturbations)

    def stage(self, worker: ItemWorker) -> ScoreStage:
        return ScoreStage(worker)


class ScoreStage(OneTurnStage):
    def after(self, answers: list[AnswerEvent], known: Known, pool: list[Item]) -> Iterator[Event]:
        yield from likelihood_events(self.worker, answers, pool, known.done)
