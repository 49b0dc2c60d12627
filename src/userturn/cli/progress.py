"""Progress of a run on stderr: rich bars on a terminal, plain log lines elsewhere.

Why two: researchers run long grids under nohup, SLURM or CI, where stderr is a file and
a rich bar writes nothing until the end (27 s of silence in a short run, hours in a
long one). There, a heartbeat thread writes one plain line every few seconds with each
active stage's counts, rate and ETA, so ``tail -f`` and job logs show the run moving,
and a stalled model call shows as a line whose counts stop changing. On a terminal the
rich bars stay. Both implement the driver's ``Progress`` protocol (``stage``, ``advance``).

``USERTURN_PROGRESS_SECONDS`` sets the interval of the plain lines (default 15).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

from userturn.errors import UserError
from userturn.redact import redact

INTERVAL_ENV = "USERTURN_PROGRESS_SECONDS"
DEFAULT_INTERVAL = 15.0


class Progress(Protocol):
    """The driver's progress protocol (``userturn.run.driver.Progress``)."""

    def stage(self, name: str, total: int) -> None: ...
    def advance(self, name: str, n: int = 1) -> None: ...


STALL_FACTOR = 3.0
"""A step that takes this many times the average step so far is reported as a stall."""
STALL_MIN_SECONDS = 10.0


def stalled_for(started: float, last: float, done: int, now: float) -> float | None:
    """Seconds since the last step when that is far longer than steps have taken (a
    stuck model call), else None: an ETA computed from the earlier pace would promise
    "eta 1s" for as long as the call hangs."""
    if done == 0:  # not started yet (a model loading, a stage waiting for the one before)
        return None
    quiet = now - last
    pace = (last - started) / done
    return quiet if quiet >= max(STALL_MIN_SECONDS, STALL_FACTOR * pace) else None


@dataclass
class Stage:
    name: str
    total: int
    started: float
    done: int = 0
    finished: float | None = None
    last: float | None = None
    """When the last step finished (None: none has)."""

    def line(self, now: float) -> str:
        """``user turns fake:x 4/6 (67%), 0.8/s, eta 3s``, or ``..., no step for 1m05s``."""
        elapsed = max(now - self.started, 1e-9)
        pct = f" ({self.done / self.total:.0%})" if self.total else ""
        text = f"{self.name} {self.done}/{self.total}{pct}"
        if self.finished is not None:
            return f"{text} done in {duration(self.finished - self.started)}"
        stall = stalled_for(self.started, self.last or self.started, self.done, now)
        if stall is not None:
            return f"{text}, no step for {duration(stall)}"
        rate = self.done / elapsed
        text += f", {rate:.2g}/s" if self.done else ", waiting"
        if self.done and self.total > self.done:
            text += f", eta {duration((self.total - self.done) / rate)}"
        return text


def duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``: short enough for a log line."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


@dataclass
class LogProgress:
    """Plain ``progress:`` lines on a stream: one every ``interval`` seconds while any
    stage is active (from a heartbeat thread, so a slow call still shows up), and one
    when a stage finishes."""

    stream: TextIO
    interval: float = DEFAULT_INTERVAL
    clock: Any = time.monotonic
    stages: dict[str, Stage] = field(default_factory=dict)
    started: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def stage(self, name: str, total: int) -> None:
        """A stage with nothing to do (no judge on a likelihood run) is not shown."""
        if total == 0:
            return
        with self._lock:
            self.stages[name] = Stage(name, total, self.clock())

    def advance(self, name: str, n: int = 1) -> None:
        st = self.stages.get(name)
        if st is None:
            return
        with self._lock:
            st.done += n
            st.last = self.clock()
        if st.done >= st.total and st.finished is None:
            self._finish(st)

    def _finish(self, st: Stage) -> None:
        st.finished = self.clock()
        self._write(st.line(st.finished))

    def tick(self) -> None:
        """Write one line for the stages in progress (none: nothing)."""
        now = self.clock()
        with self._lock:
            active = [s.line(now) for s in self.stages.values() if s.finished is None]
        if active:
            self._write("; ".join(active))

    def _write(self, text: str) -> None:
        now = self.clock()
        self.started = now if self.started is None else self.started
        with self._lock:
            self.stream.write(f"progress {duration(now - self.started)}: {redact(text)}\n")
            self.stream.flush()

    def start(self) -> None:
        self.started = self.clock()
        self._thread = threading.Thread(target=self._beat, name="userturn-progress", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            self.tick()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


class RichProgress:
    """One rich bar per stage (answers, user turns, judging) with its ETA; a stage with
    nothing to do gets no bar."""

    def __init__(self, progress: Any, clock: Any = time.monotonic) -> None:
        self.progress = progress
        self.clock = clock
        self.tasks: dict[str, Any] = {}

    def stage(self, name: str, total: int) -> None:
        if total:
            now = self.clock()
            self.tasks[name] = self.progress.add_task(
                redact(name), total=total, started=now, last=now
            )

    def advance(self, name: str, n: int = 1) -> None:
        if name in self.tasks:
            self.progress.update(self.tasks[name], advance=n, last=self.clock())


def eta_text(task: Any, now: float) -> str:
    """A bar's ETA, or how long it has been stuck (see :func:`stalled_for`)."""
    if task.finished:
        return "done"
    fields = task.fields
    started, last = fields.get("started", now), fields.get("last", now)
    stall = stalled_for(started, last, int(task.completed), now)
    if stall is not None:
        return f"no step for {duration(stall)}"
    remaining = task.time_remaining
    return "eta -" if remaining is None else f"eta {duration(remaining)}"


def interval_from_env() -> float:
    raw = os.environ.get(INTERVAL_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_INTERVAL
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise UserError(f"expected a number of seconds > 0, got {raw!r}", field=INTERVAL_ENV)
    return value


@contextmanager
def progress_for(stream: TextIO | None = None) -> Iterator[Progress]:
    """Rich bars when ``stream`` (default stderr) is a terminal, else plain log lines."""
    stream = stream or sys.stderr
    if stream.isatty():
        yield from _rich(stream)
        return
    log = LogProgress(stream, interval_from_env())
    log.start()
    try:
        yield log
    finally:
        log.stop()


def _rich(stream: TextIO) -> Iterator[Progress]:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.progress import Progress as Bars
    from rich.text import Text

    class EtaColumn(ProgressColumn):
        max_refresh = 0.5

        def render(self, task: Any) -> Text:
            return Text(eta_text(task, time.monotonic()))

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        EtaColumn(),
    )
    with Bars(*columns, console=Console(file=stream, highlight=False)) as bars:
        yield RichProgress(bars)
