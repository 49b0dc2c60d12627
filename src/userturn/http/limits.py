"""Adaptive concurrency: how many requests one client keeps in flight.

AIMD, as TCP does it: start at the configured ceiling (``?concurrency=``, default 64),
halve on HTTP 429 and grow by one slot per window of successes. A server that queues
instead of refusing just runs at the ceiling.
"""

from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger(__name__)


class AdaptiveLimiter:
    """AIMD on in-flight requests: halve on 429 (at most once per ``cooldown`` seconds,
    since one burst of concurrent 429s is one signal), +1 after ``limit`` successes."""

    def __init__(self, maximum: int, cooldown: float = 1.0) -> None:
        self.maximum = max(1, maximum)
        self.limit = self.maximum
        self.cooldown = cooldown
        self._in_flight = 0
        self._successes = 0
        self._last_cut = float("-inf")
        self._cond = threading.Condition()

    def acquire(self) -> None:
        with self._cond:
            while self._in_flight >= self.limit:
                self._cond.wait()
            self._in_flight += 1

    def release(self, throttled: bool = False) -> None:
        with self._cond:
            self._in_flight -= 1
            now = time.monotonic()
            if throttled:
                if now - self._last_cut >= self.cooldown:
                    self.limit = max(1, self.limit // 2)
                    self._last_cut = now
                    log.info("429: concurrency down to %d", self.limit)
                self._successes = 0
            else:
                self._successes += 1
                if self._successes >= self.limit and self.limit < self.maximum:
                    self.limit += 1
                    self._successes = 0
            self._cond.notify_all()
