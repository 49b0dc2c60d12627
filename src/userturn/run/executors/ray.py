"""``--executor ray [--address ADDR] [--workers N]``: items sharded over Ray actors.

Each actor holds its own backend, ``run.worker.ItemWorker`` and the probe's stage (a
rollout's actor loads its own steering judge); it never touches the store.
The driver cuts every job into the same chunks the local executor would
(``backend.batch_items`` items), gives chunk ``i`` to actor ``i % N`` (deterministic, so a
rerun shards the same way), and yields the events of each chunk back to the driver
in chunk order as they complete. Only the driver writes, in small
transactions, so a killed run resumes under either executor.

Why results match the local executor: a record's key, seed and prompt don't depend on
where it ran, and each chunk is the same request list the local executor would send, so
a batching backend (hf) sees the same batches. llama.cpp evaluates each token's matmuls
independently of what else is in its batch or cache (checked in tests/test_ray_executor).

Without ``--address`` a local Ray cluster is started for the run and stopped after it.
On a real cluster, every node needs ``userturn`` and the backend's extra installed;
actors of GPU backends (``hf``, ``vllm``) ask Ray for one GPU each when the cluster has
GPUs (vLLM with ``?tp=`` > 1 then places its own workers).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from typing import Any

import ray

from userturn import registry
from userturn.backends import load_backend
from userturn.config import RunConfig
from userturn.datasets import Dataset
from userturn.errors import UserError
from userturn.run.events import Event
from userturn.run.probes.base import Job, Known, Probe, Stage
from userturn.run.worker import ItemWorker
from userturn.types import Item

log = logging.getLogger(__name__)


class ItemActor:
    """One Ray actor: a backend, an ``ItemWorker`` and the probe's stage (made a Ray
    actor below).

    The backend loads in ``setup`` rather than ``__init__``: Ray keeps the exception of a
    failed method (a ``UserError`` comes back as itself) but only the text of a failed
    constructor.
    """

    def __init__(self, datasets: list[Dataset], known: Known) -> None:
        self.datasets = datasets
        self.known = known
        self.stage: Stage | None = None

    def setup(self, probe: Probe, model: str, date: dt.date, config_id: str) -> dict[str, Any]:
        self.backend = load_backend(model, defaults={"base_url": probe.cfg.base_url})
        worker = ItemWorker(self.backend, probe.cfg, date, config_id)
        self.stage = probe.stage(worker)
        return worker.describe()

    def process(self, job: int, items: list[Item], pool: list[Item]) -> list[Event]:
        assert self.stage is not None, "setup runs first"
        return list(self.stage.process(items, self.datasets[job], self.known, pool))

    def close(self) -> None:
        """The stage's judges and the backend, before the actor is killed."""
        if self.stage is not None:
            self.stage.close()
        backend = getattr(self, "backend", None)
        if backend is not None:
            backend.close()


_RemoteActor = ray.remote(ItemActor)


def chunk_plan(sizes: list[int], chunk: int, workers: int) -> list[tuple[int, int, int, int]]:
    """(job, start, stop, actor) for every chunk, the local executor's chunks in its order."""
    plan: list[tuple[int, int, int, int]] = []
    for job, n in enumerate(sizes):
        for start in range(0, n, chunk):
            plan.append((job, start, min(start + chunk, n), len(plan) % workers))
    return plan


def _unwrap(exc: Exception) -> Exception:
    """A ``UserError`` raised on an actor comes back as a one-line ``UserError``."""
    cause = getattr(exc, "cause", None)
    while cause is not None and not isinstance(cause, UserError):
        cause = getattr(cause, "cause", None) or cause.__cause__
    return cause if isinstance(cause, UserError) else exc


def _close(actors: list[Any]) -> None:
    """Let each actor close its stage and backend (best effort: a dead actor is killed
    all the same)."""
    try:
        ray.get([a.close.remote() for a in actors], timeout=60)
    except Exception as exc:
        log.debug("closing Ray actors: %s", exc)


class RayExecutor:
    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self._described: dict[str, Any] = {}

    def describe_model(self) -> dict[str, Any]:
        return self._described

    def _connect(self) -> bool:
        """Join ``--address`` or start a local cluster; True when we started it."""
        if ray.is_initialized():
            return False
        try:
            ray.init(
                address=self.cfg.address,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
        except ConnectionError as exc:
            raise UserError(f"cannot reach the Ray cluster: {exc}", field="address") from exc
        return True

    def _actor_options(self, model: str) -> dict[str, Any]:
        kind = registry.model_spec(model)[1].kind
        gpus = ray.cluster_resources().get("GPU", 0)  # type: ignore[no-untyped-call]
        if kind in ("hf", "vllm") and gpus:
            return {"num_gpus": 1}
        return {"num_cpus": 1}

    def run_model(
        self,
        probe: Probe,
        model: str,
        date: dt.date,
        config_id: str,
        jobs: list[Job],
        known: Known,
    ) -> Iterator[Event]:
        cfg = probe.cfg
        started = self._connect()
        actors: list[Any] = []
        try:
            opts = self._actor_options(model)
            datasets = ray.put([j.dataset for j in jobs])
            known_ref = ray.put(known)
            actors = [
                _RemoteActor.options(**opts).remote(datasets, known_ref) for _ in range(cfg.workers)
            ]
            described = self._get([a.setup.remote(probe, model, date, config_id) for a in actors])
            self._described = {**described[0], "executor": "ray", "workers": cfg.workers}
            plan = chunk_plan(
                [len(j.items) for j in jobs], described[0]["batch_items"], cfg.workers
            )
            pools = [ray.put(j.items) for j in jobs]
            refs = [
                actors[a].process.remote(job, jobs[job].items[s:e], pools[job])
                for job, s, e, a in plan
            ]
            yield from self._in_order(refs)
        finally:
            _close(actors)
            for actor in actors:
                ray.kill(actor)
            if started:
                ray.shutdown()

    def _get(self, refs: list[Any]) -> list[Any]:
        try:
            return list(ray.get(refs))
        except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as exc:
            raise _unwrap(exc) from exc

    def _in_order(self, refs: list[Any]) -> Iterator[Event]:
        """Yield each chunk's events in chunk order (the local executor's order), each as
        soon as it and the chunks before it are done; a killed driver loses at most the
        chunks in flight, never a written row."""
        for ref in refs:
            yield from self._get([ref])[0]
