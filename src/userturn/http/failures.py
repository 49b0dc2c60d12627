"""What one request came to, and a failure said in words the user can act on.

The SDK's ``APIConnectionError`` says only "Connection error."; the cause (refused,
timed out, DNS, TLS) is two or three levels down. Refusals name the field they refuse,
which is how ``shapes`` learns what a server takes. The same warning about the same
server is logged once per process (``warn_once``), so a dead server gives one line,
not one per item.
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
import threading
import urllib.error
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import openai

REFUSAL_STATUS = frozenset({400, 422, 500})
"""How servers refuse a field they can't take (llama-cpp-python answers some with 500)."""


@dataclass(frozen=True)
class CallResult:
    """One logical request after its retries: the reply, or why there is none."""

    response: dict[str, Any] | None = None
    """The reply's JSON (``choices``, ``usage``, ...), when ok."""
    error: str | None = None
    status_code: int | None = None
    body: str = ""
    attempts: int = 1
    usage: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None


FinalIf = Callable[[CallResult], bool]


class BadReply(Exception):
    """HTTP 200 whose body is JSON but not a completion (no ``choices``)."""


def _causes(exc: BaseException) -> list[BaseException]:
    """The exception and everything under it (``__cause__``, ``__context__``, URLError)."""
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and all(cur is not seen for seen in chain):
        chain.append(cur)
        reason = getattr(cur, "reason", None) if isinstance(cur, urllib.error.URLError) else None
        cur = reason if isinstance(reason, BaseException) else cur.__cause__ or cur.__context__
    return chain


def connection_reason(exc: BaseException, timeout: float | None = None) -> str:
    """Why a connection failed, in words, from the exception chain."""
    chain = _causes(exc)
    for cur in chain:
        if isinstance(cur, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cur, socket.gaierror):
            return f"cannot resolve host ({cur.strerror or cur})"
        if (
            isinstance(cur, openai.APITimeoutError | TimeoutError)
            or "Timeout" in type(cur).__name__
        ):
            return "timed out" + (f" after {timeout:g} s" if timeout else "")
        if isinstance(cur, ConnectionResetError):
            return "connection reset by the server"
        if isinstance(cur, ssl.SSLError):
            return f"TLS error ({cur.reason or cur})"
    innermost = chain[-1]
    return str(innermost).strip() or type(innermost).__name__


def error_param(body: str) -> str | None:
    """The ``error.param`` of an OpenAI-style error body (the field it refuses), if any."""
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, TypeError):
        return None
    err = data.get("error") if isinstance(data, dict) else None
    param = err.get("param") if isinstance(err, dict) else None
    return param if isinstance(param, str) and param else None


def refuses(failure: CallResult, name: str) -> bool:
    """A refusal (HTTP 400/422/500) that names the request field ``name``.

    OpenAI says which field in ``error.param``; when it does, only that counts. Other
    servers (vLLM, llama-cpp-python) name it in the message text.
    """
    if failure.status_code not in REFUSAL_STATUS:
        return False
    param = error_param(failure.body)
    if param is not None:
        return param == name or param.startswith(name + ".")
    return name in failure.body.lower()


_WARNED: set[tuple[str, ...]] = set()
_WARNED_LOCK = threading.Lock()


def warn_once(logger: logging.Logger, key: tuple[str, ...], msg: str, *args: object) -> None:
    """Warn the first time ``key`` (say, server + what went wrong) is seen in this process;
    later repeats go to debug, so a failing server gives one line, not one per item."""
    with _WARNED_LOCK:
        first = key not in _WARNED
        _WARNED.add(key)
    logger.log(logging.WARNING if first else logging.DEBUG, msg, *args)
