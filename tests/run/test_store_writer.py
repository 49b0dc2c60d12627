"""Only the driver writes a run's store, for every probe: the stages (on the workers,
in-process or on Ray actors) hand it events and never write.

Run: ``.venv/bin/python -m pytest tests/run/test_store_writer.py -q`` (a few seconds, on
the scripted ``fake:`` backend). Every write method of the store is wrapped for the run,
and each call is traced to the ``userturn`` module that made it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from userturn.config import build_config
from userturn.run.driver import run
from userturn.rundir.store import Store

WRITES = (
    "set_meta_default",
    "put_config",
    "put_item_hash",
    "put_item_hashes",
    "put_answer",
    "update_answer",
    "put_user_turn",
    "put_likelihood",
    "put_judgment",
)
DRIVER = {"userturn.run.driver", "userturn.run.judge_stage"}
"""The driver, and the judge stage it calls once the work is done."""


def _caller() -> str:
    """The first ``userturn`` module outside the store on the stack."""
    frame = sys._getframe(2)
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        if name.startswith("userturn.") and not name.startswith("userturn.rundir"):
            return name
        frame = frame.f_back  # type: ignore[assignment]
    return "?"


@pytest.fixture
def writers(monkeypatch: pytest.MonkeyPatch) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {}

    def wrap(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def traced(self: Store, *args: Any, **kwargs: Any) -> Any:
            seen.setdefault(name, set()).add(_caller())
            return method(self, *args, **kwargs)

        return traced

    for name in WRITES:
        monkeypatch.setattr(Store, name, wrap(name, getattr(Store, name)))
    return seen


BASE: dict[str, Any] = {"models": ["fake:w"], "datasets": ["gsm8k"], "limit": 2}


@pytest.mark.parametrize(
    "over",
    [
        {"temperatures": [0.0, 1.0], "samples": 2, "judges": ["offline"]},
        {"probe": "likelihood", "datasets": ["healthbench"], "judges": []},
        {
            "probe": "rollout",
            "temperatures": [1.0],
            "turns": 2,
            "best_of": 2,
            "stop_on": "degenerate",
            "judges": ["offline", "rules"],
        },
    ],
    ids=["generate", "likelihood", "rollout"],
)
def test_only_the_driver_writes_the_store(
    writers: dict[str, set[str]], tmp_path: Path, over: dict[str, Any]
) -> None:
    res = run(build_config({**BASE, **over}), tmp_path / "r")
    assert res.stats.generated + res.stats.extra.get("likelihood_scored", 0) > 0
    records = {"put_user_turn", "put_likelihood"} & set(writers)
    assert records and "put_answer" in writers  # the probe's records were written
    callers = set().union(*writers.values())
    assert callers <= DRIVER, writers
