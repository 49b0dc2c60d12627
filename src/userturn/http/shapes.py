"""Which request shape a server takes, found with its first real request.

Servers refuse different optional fields (``response_format`` forms, ``max_tokens`` on
reasoning models, vLLM-only options). A refusal that names a field moves to the next
shape at once (a capability check, not a retried error), and the answer is kept in a
``ShapeBook``, one entry per (purpose, server, model). Servers that silently ignore a
field keep getting it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from userturn.http.failures import CallResult, FinalIf

log = logging.getLogger(__name__)

S = TypeVar("S")
MAX_ADAPTATIONS = 8


class ShapeBook:
    """What each server was found to take, and a lock per server so one thread detects
    while the others wait for its answer. Clients of one process share ``BOOK`` (two
    judges on one server detect once); a test passes its own."""

    def __init__(self) -> None:
        self._found: dict[tuple[str, ...], Any] = {}
        self._locks: dict[tuple[str, ...], threading.Lock] = {}
        self._guard = threading.Lock()

    def lock(self, key: tuple[str, ...]) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def get(self, key: tuple[str, ...]) -> Any:
        return self._found.get(key)

    def put(self, key: tuple[str, ...], shape: Any) -> None:
        self._found[key] = shape


BOOK = ShapeBook()


class ShapeDetector(Generic[S]):
    """Finds, with a server's first real request, which request shape it accepts.

    ``start`` is the richest shape; ``adapt(shape, failure)`` gives the next shape to try
    when ``failure`` is a refusal of something in ``shape``, else None. Refusals return
    from the client at once (they are answers, not accidents), so detection costs one
    extra request per refused field, once per key. Other failures settle nothing: the
    next request detects again.
    """

    def __init__(
        self,
        key: tuple[str, ...],
        start: S,
        adapt: Callable[[S, CallResult], S | None],
        book: ShapeBook = BOOK,
    ) -> None:
        self.key = key
        self.start = start
        self.adapt = adapt
        self.book = book
        self._lock = book.lock(key)

    @property
    def shape(self) -> S | None:
        """The shape this server is known to take, or None before the first success."""
        found: S | None = self.book.get(self.key)
        return found

    def call(self, send: Callable[[S, FinalIf], CallResult]) -> CallResult:
        """``send(shape, final_if)`` with the known shape, detecting it first if needed."""
        known = self.shape
        if known is not None:
            return send(known, lambda _: False)
        with self._lock:
            known = self.shape
            if known is None:
                return self._detect(send)
        # sent outside the lock: the calls that waited for the detection go out together,
        # not one by one behind whichever of them the server is slow to answer
        return send(known, lambda _: False)

    def _detect(self, send: Callable[[S, FinalIf], CallResult]) -> CallResult:
        shape = self.start
        for _ in range(MAX_ADAPTATIONS):
            res = send(shape, self._refusal_of(shape))
            if res.ok:
                self.book.put(self.key, shape)
                return res
            nxt = self.adapt(shape, res)
            if nxt is None:
                return res
            log.info(
                "%s refused %s (HTTP %s); now sending %s", self.key[1], shape, res.status_code, nxt
            )
            shape = nxt
        return res

    def _refusal_of(self, shape: S) -> FinalIf:
        def final_if(failure: CallResult) -> bool:
            return self.adapt(shape, failure) is not None

        return final_if
