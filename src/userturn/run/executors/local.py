"""In-process executor: one backend, chunks of ``backend.batch_items`` items."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

from userturn.backends import load_backend
from userturn.run.events import Event
from userturn.run.probes.base import Job, Known, Probe
from userturn.run.worker import ItemWorker


class LocalExecutor:
    def __init__(self) -> None:
        self._described: dict[str, Any] = {}

    def run_model(
        self,
        probe: Probe,
        model: str,
        date: dt.date,
        config_id: str,
        jobs: list[Job],
        known: Known,
    ) -> Iterator[Event]:
        backend = load_backend(model, defaults={"base_url": probe.cfg.base_url})
        try:
            worker = ItemWorker(backend, probe.cfg, date, config_id)
            self._described = worker.describe()
            stage = probe.stage(worker)
            try:
                size = max(1, backend.batch_items)
                for job in jobs:
                    for start in range(0, len(job.items), size):
                        chunk = job.items[start : start + size]
                        yield from stage.process(chunk, job.dataset, known, job.items)
            finally:
                stage.close()
        finally:
            backend.close()

    def describe_model(self) -> dict[str, Any]:
        return self._described
