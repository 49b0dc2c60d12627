"""The one OpenAI-SDK client that every HTTP backend and judge goes through.

Why one wrapper (inspect_ai's lesson): retries, concurrency and accounting live in one
place, so a backend or judge only builds a payload and reads a reply.

- **Adaptive concurrency.** An AIMD limiter on a thread pool: it starts at the configured
  ceiling (``?concurrency=``, default 64), halves on HTTP 429 and grows by one slot per
  window of successes. Servers that queue instead of refusing just run at the ceiling.
- **Retries are bounded and classified.** 429 has its own budget and honours
  ``Retry-After`` / ``retry-after-ms`` (a rate limit is the server asking us to wait, not
  a failure). 5xx, 408/409, timeouts and replies that aren't JSON get exponential backoff
  with jitter. Other 4xx are not retried; 401/403 stop the run with a ``UserError``
  because every later call would fail the same way. The SDK's own retries are off, so
  they don't stack with ours.
- **Usage and cost per call.** Token counts come from the reply; the price comes from a
  table the user sets (``USERTURN_PRICES`` = a YAML/JSON file or inline JSON mapping
  model -> ``{input, output}`` USD per million tokens, or ``?price_in=&price_out=``).
  No built-in prices: an unknown price is ``None``, never a guess.
- **The key** comes from ``OPENAI_API_KEY`` or the variable named by ``?api_key_env=``.
  It is handed to the SDK and nowhere else: not logged, not in ``describe()``, not stored.
- **Reachability and identity.** ``server_entry()`` asks ``/v1/models`` once, with one
  attempt: a dead server fails at startup with one line naming the URL and the cause
  ("connection refused", "timed out", "cannot resolve host"), before any other request
  could warn about something else. The entry's stable fields plus the base URL and the
  served name make ``fingerprint()``, so another checkpoint served under the same name
  doesn't reuse cached results.
- **Request shapes.** Servers refuse different optional fields (``response_format``
  forms, ``max_tokens`` on reasoning models, vLLM-only options). ``ShapeDetector`` finds
  what a server takes with its first real request: a refusal that names a field moves to
  the next shape at once (a capability check, not a retried error), and the answer is
  kept for the process. Servers that silently ignore a field keep getting it.
- **Warnings once.** The same warning about the same server is logged once per process
  (``warn_once``); repeats go to debug, so a dead server can't print the same line per item.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import logging
import os
import random
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import urlparse

import openai
import yaml

from userturn.errors import UserError

try:  # the HTTP library under the SDK: httpx2 in openai>=3, httpx before
    import httpx2 as _http_lib
except ModuleNotFoundError:  # pragma: no cover - depends on the installed SDK
    import httpx as _http_lib  # type: ignore[no-redef]

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")
S = TypeVar("S")
Endpoint = Literal["completions", "chat"]

TRANSPORT_OPTIONS = frozenset(
    {
        "base_url",
        "api_key_env",
        "concurrency",
        "timeout",
        "max_retries",
        "rate_limit_retries",
        "backoff",
        "price_in",
        "price_out",
    }
)
"""Spec options that say how to reach a model, not which model: kept out of ids and keys."""
ROUTES: dict[str, str] = {"completions": "/completions", "chat": "/chat/completions"}
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0"})
RETRYABLE_STATUS = frozenset({408, 409})
REFUSAL_STATUS = frozenset({400, 422, 500})
"""How servers refuse a field they can't take (llama-cpp-python answers some with 500)."""
VOLATILE_MODEL_FIELDS = frozenset({"created", "permission", "permissions"})
"""``/v1/models`` fields that change on every server start (vLLM stamps ``created`` and
random permission ids per request): kept out of the fingerprint."""
FinalIf = Callable[["CallResult"], bool]


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6


def load_prices(env: Mapping[str, str] | None = None) -> dict[str, Price]:
    """The user's price table from ``USERTURN_PRICES`` (a file path or inline JSON)."""
    raw = (env if env is not None else os.environ).get("USERTURN_PRICES", "").strip()
    if not raw:
        return {}
    where = "USERTURN_PRICES"
    if not raw.startswith("{"):
        path = Path(raw)
        if not path.is_file():
            raise UserError("price table file not found", file=raw, field="USERTURN_PRICES")
        raw, where = path.read_text(encoding="utf-8"), str(path)
    try:
        data = yaml.safe_load(raw)
        return {str(m): Price(float(p["input"]), float(p["output"])) for m, p in data.items()}
    except (yaml.YAMLError, AttributeError, KeyError, TypeError, ValueError) as exc:
        raise UserError(
            "price table must map model -> {input: USD/1M, output: USD/1M}",
            file=where,
            field="USERTURN_PRICES",
        ) from exc


def price_for(model: str, options: Mapping[str, str]) -> Price | None:
    if "price_in" in options or "price_out" in options:
        try:
            return Price(float(options.get("price_in", 0)), float(options.get("price_out", 0)))
        except ValueError as exc:
            raise UserError("price_in/price_out must be numbers", field="model") from exc
    return load_prices().get(model)


@dataclass
class Usage:
    """Running totals for one client (thread-safe via the client's lock)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    retries: int = 0
    throttled: int = 0

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


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


class BadReply(Exception):
    """HTTP 200 whose body is JSON but not a completion (no ``choices``)."""


AttemptKind = Literal["ok", "rate", "retry", "final"]


@dataclass(frozen=True)
class _Attempt:
    kind: AttemptKind
    response: Any = None
    failure: CallResult | None = None
    wait: float | None = None


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 4
    """5xx, 408/409, timeouts and connection errors."""
    rate_limit_retries: int = 8
    """429s: separate, larger budget, since waiting is the expected response."""
    backoff: float = 0.5
    max_backoff: float = 30.0
    max_retry_after: float = 120.0

    def delay(self, attempt: int) -> float:
        base = min(self.max_backoff, self.backoff * 2.0**attempt)
        return base * (0.5 + random.random() / 2)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> RetryPolicy:
        try:
            return cls(
                max_retries=int(options.get("max_retries", cls.max_retries)),
                rate_limit_retries=int(options.get("rate_limit_retries", cls.rate_limit_retries)),
                backoff=float(options.get("backoff", cls.backoff)),
            )
        except ValueError as exc:
            raise UserError(
                "max_retries/rate_limit_retries/backoff must be numbers", field="model"
            ) from exc


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date)."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time()) if when else None


def resolve_base_url(options: Mapping[str, str], base_url: str | None) -> str | None:
    """``?base_url=``, else ``--base-url``/``--judge-base-url``, else ``OPENAI_BASE_URL``."""
    return options.get("base_url") or base_url or os.environ.get("OPENAI_BASE_URL") or None


def resolve_api_key(options: Mapping[str, str], base_url: str | None) -> str:
    name = options.get("api_key_env")
    if name:
        key = os.environ.get(name)
        if not key:
            raise UserError(
                f"environment variable {name} (named by ?api_key_env=) is not set",
                field="api_key_env",
            )
        return key
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        return key
    host = urlparse(base_url or "").hostname or ""
    if base_url and host in LOCAL_HOSTS:
        return "EMPTY"  # local servers (llama.cpp, vLLM) accept any key
    raise UserError(
        "no API key: set OPENAI_API_KEY, or name another variable with "
        "?api_key_env=VAR (use OPENAI_API_KEY=EMPTY for servers without auth)",
        field="api_key",
    )


def _int_option(options: Mapping[str, str], name: str, default: int) -> int:
    try:
        return int(options.get(name, default))
    except ValueError as exc:
        raise UserError(f"option {name}={options[name]!r} is not an integer", field=name) from exc


def _float_option(options: Mapping[str, str], name: str, default: float) -> float:
    try:
        return float(options.get(name, default))
    except ValueError as exc:
        raise UserError(f"option {name}={options[name]!r} is not a number", field=name) from exc


_WARNED: set[tuple[str, ...]] = set()
_WARNED_LOCK = threading.Lock()


def warn_once(logger: logging.Logger, key: tuple[str, ...], msg: str, *args: object) -> None:
    """Warn the first time ``key`` (say, server + what went wrong) is seen in this process;
    later repeats go to debug, so a failing server gives one line, not one per item."""
    with _WARNED_LOCK:
        first = key not in _WARNED
        _WARNED.add(key)
    logger.log(logging.WARNING if first else logging.DEBUG, msg, *args)


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
    """Why a connection failed, in words, from the exception chain.

    The SDK's ``APIConnectionError`` says only "Connection error."; the cause (refused,
    timed out, DNS, TLS) is two or three levels down, and it is what the user can act on.
    """
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


def model_fingerprint(url: str, model: str, served: Mapping[str, Any]) -> str:
    """16 hex digits identifying (base URL, served name, the server's stable metadata)."""
    blob = json.dumps(
        {"base_url": url, "model": model, "served": served}, sort_keys=True, default=str
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


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


class OpenAIClient:
    """A model on an OpenAI-compatible server, with retries, AIMD and accounting."""

    def __init__(self, model: str, options: Mapping[str, str], base_url: str | None = None) -> None:
        self.model = model
        self.base_url = resolve_base_url(options, base_url)
        self.api_key_env = options.get("api_key_env") or "OPENAI_API_KEY"
        self.timeout = _float_option(options, "timeout", 120.0)
        self.policy = RetryPolicy.from_options(options)
        self.concurrency = _int_option(options, "concurrency", 64)
        self.limiter = AdaptiveLimiter(self.concurrency)
        self.price = price_for(model, options)
        self.usage = Usage(cost_usd=0.0 if self.price else None)
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._probe_lock = threading.Lock()
        self._probed: tuple[dict[str, Any] | None] | UserError | None = None
        self._sdk = openai.OpenAI(
            base_url=self.base_url,
            api_key=resolve_api_key(options, self.base_url),
            max_retries=0,
            timeout=self.timeout,
        )

    @property
    def url(self) -> str:
        """The base URL requests go to (``http://host:port/v1``), as users write it."""
        return str(self._sdk.base_url).rstrip("/")

    @property
    def server(self) -> str:
        """The server's root URL (``base_url`` without ``/v1``), for per-server facts."""
        return self.url.removesuffix("/v1")

    # reachability and identity ----------------------------------------------------------
    def server_entry(self) -> dict[str, Any] | None:
        """This model's ``/v1/models`` entry (None if the server has no such route).

        Asked once per client, with one attempt: it is the startup check, so a dead
        server fails here with one line instead of after every retry of every item.
        The outcome, failure included, is kept, so concurrent callers don't re-ask.
        """
        with self._probe_lock:
            if self._probed is None:
                try:
                    self._probed = (self._fetch_entry(),)
                except UserError as exc:
                    self._probed = exc
            if isinstance(self._probed, UserError):
                raise self._probed
            return self._probed[0]

    def _fetch_entry(self) -> dict[str, Any] | None:
        try:
            raw = self._sdk.get(
                "/models", cast_to=_http_lib.Response, options={"timeout": min(self.timeout, 30)}
            )
            listed = json.loads(raw.read()).get("data")
        except openai.APIConnectionError as exc:  # timeouts too
            raise UserError(
                f"cannot reach {self.url}: {connection_reason(exc, min(self.timeout, 30))}",
                field="base_url",
            ) from exc
        except openai.APIStatusError as exc:
            self._failure(exc)  # 401/403 stop here
            log.info("%s/models answered HTTP %s; no model metadata", self.url, exc.status_code)
            return None
        except (json.JSONDecodeError, AttributeError):
            return None
        return self._pick_entry(listed if isinstance(listed, list) else [])

    def _pick_entry(self, listed: list[Any]) -> dict[str, Any] | None:
        """The entry named like the model; a server with one model serves it under any
        name (llama-cpp-python lists the file path), so that one entry is the model."""
        entries = [e for e in listed if isinstance(e, dict)]
        for entry in entries:
            if entry.get("id") == self.model:
                return entry
        if len(entries) == 1:
            return entries[0]
        if entries:
            served = ", ".join(str(e.get("id")) for e in entries[:10])
            warn_once(
                log,
                ("not-listed", self.url, self.model),
                "%s does not list model %r (it serves: %s)",
                self.url,
                self.model,
                served,
            )
        return None

    def fingerprint(self) -> str:
        """A stable id of (base URL, served name, the server's metadata for it).

        It goes into record and cache keys: a different server, or another checkpoint
        served under the same name, gets new keys. Fields that change per server start
        (``created``, permission ids) are left out, so a restart of the same model keeps
        its keys.
        """
        entry = self.server_entry() or {}
        stable = {k: v for k, v in entry.items() if k not in VOLATILE_MODEL_FIELDS}
        return model_fingerprint(self.url, self.model, stable)

    def describe(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "base_url": self.base_url,
            "api_key_env": self.api_key_env,
            "concurrency": self.concurrency,
        }

    # one request ----------------------------------------------------------------------
    def request(
        self,
        endpoint: Endpoint,
        final_if: Callable[[CallResult], bool] | None = None,
        **kwargs: Any,
    ) -> CallResult:
        """POST to ``/completions`` or ``/chat/completions`` with bounded retries.

        ``final_if`` marks failures that are answers, not accidents (a server rejecting a
        ``response_format`` with HTTP 500): they return at once instead of being retried.
        """
        path = ROUTES[endpoint]
        extra = kwargs.pop("extra_body", None) or {}  # popped first: never sent as a field
        body = {"model": self.model, **kwargs, **extra}

        def create() -> dict[str, Any]:
            # The SDK's raw post, read as JSON: the typed ``create()`` walks the body and
            # builds pydantic models per call, which costs a third of the client's CPU at
            # hundreds of requests per second. Replies are plain dicts.
            raw = self._sdk.post(path, body=body, cast_to=_http_lib.Response)
            data = json.loads(raw.read())
            if not isinstance(data, dict) or not data.get("choices"):
                raise BadReply(str(data)[:2000])
            return data

        errors = rate_limited = 0
        while True:
            att = self._attempt(create)
            if att.failure is not None and final_if is not None and final_if(att.failure):
                n = errors + rate_limited + 1
                self._count(calls=n)
                return replace(att.failure, attempts=n, usage={"calls": n})
            attempts = errors + rate_limited + 1
            if att.kind == "ok":
                return self._success(att.response, attempts)
            if att.kind == "rate":
                rate_limited += 1
                over = rate_limited > self.policy.rate_limit_retries
            elif att.kind == "retry":
                errors += 1
                over = errors > self.policy.max_retries
            else:
                over = True
            assert att.failure is not None
            if over:
                return self._give_up(
                    replace(att.failure, attempts=attempts, usage={"calls": attempts})
                )
            self._count(retries=1, throttled=int(att.kind == "rate"))
            time.sleep(self._wait(att.wait, attempts - 1))

    def _attempt(self, create: Callable[[], Any]) -> _Attempt:
        """One HTTP call under the limiter, classified for the retry loop."""
        self.limiter.acquire()
        throttled = False
        try:
            return _Attempt("ok", response=create())
        except openai.RateLimitError as exc:
            throttled = True
            return _Attempt(
                "rate", failure=self._failure(exc), wait=retry_after(exc.response.headers)
            )
        except openai.APIStatusError as exc:
            kind: AttemptKind = "retry" if self._retryable(exc.status_code) else "final"
            return _Attempt(
                kind, failure=self._failure(exc), wait=retry_after(exc.response.headers)
            )
        except (openai.APIConnectionError, json.JSONDecodeError, BadReply) as exc:  # + timeouts
            return _Attempt("retry", failure=self._failure(exc))
        finally:
            self.limiter.release(throttled=throttled)

    def _wait(self, hinted: float | None, attempt: int) -> float:
        if hinted is not None and hinted > 0:
            return min(hinted, self.policy.max_retry_after)
        return self.policy.delay(attempt)

    @staticmethod
    def _retryable(status: int) -> bool:
        return status >= 500 or status in RETRYABLE_STATUS

    def _failure(self, exc: Exception) -> CallResult:
        status = getattr(exc, "status_code", None)
        if status in (401, 403):
            raise UserError(
                f"{self.base_url or 'the API'} refused the key from "
                f"${self.api_key_env} (HTTP {status})",
                field="api_key",
            )
        response = getattr(exc, "response", None)
        body = str(exc) if isinstance(exc, BadReply) else ""
        if response is not None:
            try:
                body = response.text[:2000]
            except Exception:  # a body that can't be read is just not shown
                body = ""
        kind = type(exc).__name__
        if status:
            reason = f"HTTP {status}: {kind}"
        elif isinstance(exc, openai.APIConnectionError):
            reason = f"cannot reach {self.url}: {connection_reason(exc, self.timeout)}"
        else:
            reason = kind
        return CallResult(error=reason, status_code=status, body=body)

    def _give_up(self, failure: CallResult) -> CallResult:
        self._count(calls=failure.attempts)
        warn_once(
            log,
            ("give-up", self.url, self.model, failure.error or ""),
            "%s %s: giving up after %d attempts: %s %s",
            self.url,
            self.model,
            failure.attempts,
            failure.error,
            failure.body[:200],
        )
        return failure

    def _success(self, response: dict[str, Any], attempts: int) -> CallResult:
        u = response.get("usage") or {}
        prompt = int(u.get("prompt_tokens") or 0)
        completion = int(u.get("completion_tokens") or 0)
        cost = self.price.cost(prompt, completion) if self.price else None
        self._count(calls=attempts, prompt=prompt, completion=completion, cost=cost)
        return CallResult(
            response=response,
            attempts=attempts,
            usage={
                "calls": attempts,
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "cost_usd": cost,
            },
        )

    def _count(
        self,
        *,
        calls: int = 0,
        prompt: int = 0,
        completion: int = 0,
        cost: float | None = None,
        retries: int = 0,
        throttled: int = 0,
    ) -> None:
        with self._lock:
            u = self.usage
            u.calls += calls
            u.prompt_tokens += prompt
            u.completion_tokens += completion
            u.retries += retries
            u.throttled += throttled
            if cost is not None:
                u.cost_usd = (u.cost_usd or 0.0) + cost

    # many requests --------------------------------------------------------------------
    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``fn`` over ``items`` on the pool, results in input order; the limiter, not
        the pool size, decides how many requests are in flight."""
        if len(items) <= 1:
            return [fn(x) for x in items]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="userturn-http")
        return list(self._pool.map(fn, items))

    def post_json(self, path: str, body: dict[str, Any], timeout: float = 30.0) -> Any | None:
        """POST to a non-OpenAI route on the same server (``/extras/tokenize``); None on
        404/405, so callers can probe for optional endpoints."""
        req = urllib.request.Request(
            self.server + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {self._sdk.api_key}",
            },
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            if exc.code in (404, 405, 422):
                return None
            raise
        except (urllib.error.URLError, OSError, json.JSONDecodeError) as exc:
            log.debug("%s%s: %s", self.server, path, connection_reason(exc, timeout))
            return None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self._sdk.close()


_SHAPES: dict[tuple[str, ...], Any] = {}
"""(purpose, server, model) -> the request shape that server takes, found once per process."""
_SHAPE_LOCKS: dict[tuple[str, ...], threading.Lock] = {}
_SHAPE_LOCKS_GUARD = threading.Lock()
MAX_ADAPTATIONS = 8


class ShapeDetector(Generic[S]):
    """Finds, with a server's first real request, which request shape it accepts.

    ``start`` is the richest shape; ``adapt(shape, failure)`` gives the next shape to try
    when ``failure`` is a refusal of something in ``shape``, else None. Refusals return
    from the client at once (they are answers, not accidents), so detection costs one
    extra request per refused field, once per (purpose, server, model). Other failures
    settle nothing: the next request detects again. While one thread detects, the others
    wait for its answer instead of each meeting the same refusal.
    """

    def __init__(
        self,
        key: tuple[str, ...],
        start: S,
        adapt: Callable[[S, CallResult], S | None],
    ) -> None:
        self.key = key
        self.start = start
        self.adapt = adapt
        with _SHAPE_LOCKS_GUARD:
            self._lock = _SHAPE_LOCKS.setdefault(key, threading.Lock())

    @property
    def shape(self) -> S | None:
        """The shape this server is known to take, or None before the first success."""
        found: S | None = _SHAPES.get(self.key)
        return found

    def call(self, send: Callable[[S, FinalIf], CallResult]) -> CallResult:
        """``send(shape, final_if)`` with the known shape, detecting it first if needed."""
        known = self.shape
        if known is not None:
            return send(known, lambda _: False)
        with self._lock:
            known = self.shape
            if known is not None:
                return send(known, lambda _: False)
            return self._detect(send)

    def _detect(self, send: Callable[[S, FinalIf], CallResult]) -> CallResult:
        shape = self.start
        for _ in range(MAX_ADAPTATIONS):
            res = send(shape, self._refusal_of(shape))
            if res.ok:
                _SHAPES[self.key] = shape
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
