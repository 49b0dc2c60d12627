"""Measured generation speed per model spec, so ``run`` can say how long it will take.

Why measured and stored: a time estimate from a figure typed into the code is wrong on
every machine but one. Each ``userturn run`` that generates records, for its model spec,
the tokens it generated and the wall time it took end to end (model load and judging
included: that is what a user waits for). ``--dry-run`` and the line a run prints
before it starts turn the latest record into an estimate, and say when there is none.
The file lives in the user cache (``speed.json``, or ``$USERTURN_SPEED_FILE``), one
entry per spec.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from userturn import assets

FILE = "speed.json"
MIN_CALLS = 4
"""Fewer generated calls than this say more about model loading than about speed."""


@dataclass(frozen=True)
class Speed:
    tokens: int
    calls: int
    seconds: float
    date: str

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def seconds_per_call(self) -> float:
        return self.seconds / self.calls if self.calls else 0.0

    def describe(self) -> str:
        """``41 tok/s, 95 tokens per call over 300 calls on 2026-12-01``."""
        per_call = self.tokens / self.calls if self.calls else 0
        return (
            f"{self.tokens_per_s:.3g} tok/s and {per_call:.0f} tokens per call, measured over "
            f"{self.calls} calls on {self.date}"
        )


ENV = "USERTURN_SPEED_FILE"


def _path() -> Path:
    """``$USERTURN_SPEED_FILE``, else ``speed.json`` in the user cache."""
    env = os.environ.get(ENV)
    return Path(env) if env else assets.cache_dir() / FILE


def _read() -> dict[str, dict[str, object]]:
    try:
        data = json.loads(_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def lookup(spec: str) -> Speed | None:
    entry = _read().get(spec)
    if not isinstance(entry, dict):
        return None
    try:
        return Speed(
            int(entry["tokens"]),  # type: ignore[call-overload]
            int(entry["calls"]),  # type: ignore[call-overload]
            float(entry["seconds"]),  # type: ignore[arg-type]
            str(entry["date"]),
        )
    except (KeyError, TypeError, ValueError):
        return None


def record(spec: str, tokens: int, calls: int, seconds: float) -> Speed | None:
    """Store a run's speed for ``spec`` (ignored below ``MIN_CALLS`` calls); the file is
    replaced atomically, and a cache that cannot be written is no reason to fail a run."""
    if calls < MIN_CALLS or tokens <= 0 or seconds <= 0:
        return None
    speed = Speed(tokens, calls, round(seconds, 3), dt.date.today().isoformat())
    data = _read()
    data[spec] = asdict(speed)
    path = _path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{FILE}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(path)
    except OSError:
        return None
    return speed


def estimate(spec: str, calls: int) -> str:
    """How long ``calls`` generations of ``spec`` take, from its stored speed."""
    if calls <= 0:
        return "nothing to generate"
    speed = lookup(spec)
    if speed is None:
        return (
            f"unknown: no measured speed for {spec} yet (every run stores its tokens/s; "
            "a --limit 2 run measures it)"
        )
    from userturn.cli.progress import duration

    return f"about {duration(calls * speed.seconds_per_call)} ({speed.describe()})"
