"""The generation probe (``userturn run``): one user turn per sample, judged afterwards.

Each context (item × perturbation) gets one user turn at T=0 and k at T>0; every judge
judges them once the generation is done.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar

from userturn.run.events import AnswerEvent, Event
from userturn.run.probes.base import Known, OneTurnStage, ProbeBase
from userturn.run.worker import samples_at
from userturn.types import Item
from userturn.types import Probe as ProbeName

if TYPE_CHECKING:
    from userturn.run.probes.base import Job
    from userturn.run.worker import ItemWorker


class GenerateProbe(ProbeBase):
    name: ClassVar[ProbeName] = "generate"
    command: ClassVar[str] = "run"
    unit: ClassVar[str] = "user turns"
    estimates_speed: ClassVar[bool] = True

    def planned(self, jobs: list[Job]) -> int:
        cfg = self.cfg
        per_context = sum(samples_at(t, cfg.samples) for t in cfg.temperatures)
        return sum(len(j.items) for j in jobs) * len(cfg.perturbations) * per_context

    def stage(self, worker: ItemWorker) -> UserTurnStage:
        return UserTurnStage(worker)


class UserTurnStage(OneTurnStage):
    def after(self, answers: list[AnswerEvent], known: Known, pool: list[Item]) -> Iterator[Event]:
        yield from self.worker.user_turns(answers, known.done)
