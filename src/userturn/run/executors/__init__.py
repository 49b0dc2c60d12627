"""Where the worker runs: in-process (``local``) or on Ray actors (``ray``).

An executor turns (probe, model, jobs) into a stream of the probe's events; it never
touches the store, so the driver alone writes, and both executors run every probe and
resume it the same way.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any, Protocol

from userturn.config import RunConfig
from userturn.errors import missing_extra
from userturn.run.events import Event
from userturn.run.probes.base import Job, Known, Probe


class Executor(Protocol):
    def run_model(
        self,
        probe: Probe,
        model: str,
        date: dt.date,
        config_id: str,
        jobs: list[Job],
        known: Known,
    ) -> Iterator[Event]: ...

    def describe_model(self) -> dict[str, Any]: ...


def make_executor(cfg: RunConfig) -> Executor:
    if cfg.executor == "ray":
        try:
            from userturn.run.executors.ray import RayExecutor
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("userturn"):
                raise
            raise missing_extra("ray", "ray") from exc
        return RayExecutor(cfg)
    from userturn.run.executors.local import LocalExecutor

    return LocalExecutor()
