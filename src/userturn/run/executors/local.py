"""In-process executor: one backend, chunks of ``backend.batch_items`` items."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

from userturn.backends import load_backend
from userturn.config import RunConfig
from userturn.run.events import Event
from userturn.run.executors import Job
from userturn.run.worker import ItemWorker
from userturn.rundir.records import AnswerRecord


class LocalExecutor:
    def __init__(self) -> None:
        self._described: dict[str, Any] = {}

    def run_model(
        self,
        model: str,
        cfg: RunConfig,
        date: dt.date,
        config_id: str,
        jobs: list[Job],
        known: dict[str, AnswerRecord],
        done: set[str],
    ) -> Iterator[Event]:
        backend = load_backend(model, defaults={"base_url": cfg.base_url})
        try:
            worker = ItemWorker(backend, cfg, date, config_id)
            self._described = worker.describe()
            size = max(1, backend.batch_items)
            for job in jobs:
                for start in range(0, len(job.items), size):
                    chunk = job.items[start : start + size]
                    yield from worker.process(chunk, job.dataset, known, done, job.items)
        finally:
            backend.close()

    def describe_model(self) -> dict[str, Any]:
        return self._described
