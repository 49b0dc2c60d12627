"""The one OpenAI-SDK client that every HTTP backend and judge goes through.

Why one wrapper (inspect_ai's lesson): retries, concurrency and accounting live in one
place, so a backend or judge only builds a payload and reads a reply.

- **The synchronous SDK on a thread pool.** ``map`` runs callers' functions side by side
  on ``concurrency`` threads, each sending its own requests. The SDK's ``AsyncOpenAI`` on
  one event loop, over aiohttp or httpx, was measured against it side by side
  (``bench/p5_judge.py --transports``) and was slower, so the pool stays. The transport
  is two methods (``_get``, ``_post``: the raw body of one request, by the deadline), so
  the benchmark sends the same requests through the others.
- **A deadline per attempt.** ``?timeout=`` bounds an attempt, not each read: the reply is
  read as it arrives and abandoned at the deadline, so a server that sends a byte a
  second can't hold a call past it. (Before the headers, each read waits at most
  ``timeout``; servers send them when the completion is done.)
- **Adaptive concurrency** (``limits``) and **bounded, classified retries** (``retry``):
  401/403 stop the run with a ``UserError`` because every later call would fail the same
  way. The SDK's own retries are off, so they don't stack with ours.
- **Usage and cost per call.** Token counts come from the reply; prices from ``prices``.
- **The key** comes from ``OPENAI_API_KEY`` or the variable named by ``?api_key_env=``.
  It is handed to the SDK and nowhere else: not logged, not in ``describe()``, not stored.
  Credentials written into the base URL are masked in every message (``redact``).
- **Reachability and identity.** ``server_entry()`` asks ``/v1/models`` once, with one
  attempt: a dead server fails at startup with one line naming the URL and the cause,
  before any other request could warn about something else. The entry's stable fields
  plus the base URL and the served name make ``fingerprint()``, so another checkpoint
  served under the same name doesn't reuse cached results.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

import openai

from userturn.errors import UserError
from userturn.http.failures import BadReply, CallResult, connection_reason, warn_once
from userturn.http.limits import AdaptiveLimiter
from userturn.http.options import HTTPOptions, resolve_api_key, resolve_base_url
from userturn.http.prices import price_for
from userturn.http.retry import RetryPolicy, retry_after, retryable
from userturn.redact import redact, redact_logs

try:  # the HTTP library under the SDK: httpx2 in openai>=3, httpx before
    import httpx2 as _http_lib
except ModuleNotFoundError:  # pragma: no cover - depends on the installed SDK
    import httpx as _http_lib  # type: ignore[no-redef]

log = logging.getLogger(__name__)
redact_logs("httpx", "httpx2", "httpcore", "httpcore2", "openai", "openai._base_client")

T = TypeVar("T")
R = TypeVar("R")
Endpoint = Literal["completions", "chat"]
ROUTES: dict[str, str] = {"completions": "/completions", "chat": "/chat/completions"}
VOLATILE_MODEL_FIELDS = frozenset({"created", "permission", "permissions"})
"""``/v1/models`` fields that change on every server start (vLLM stamps ``created`` and
random permission ids per request): kept out of the fingerprint."""
PROBE_TIMEOUT = 30.0
UNREACHED = (openai.APIConnectionError, TimeoutError, _http_lib.TransportError)
"""No reply: the SDK's connection errors and timeouts, our deadline, and the transport's
own errors while the body is read here (a reset, a read timeout)."""
STREAM_BODY = {"X-Stainless-Raw-Response": "stream"}
"""Asks the SDK for the raw reply before its body is read, so the body is read here, by
a deadline."""


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


AttemptKind = Literal["ok", "rate", "retry", "final"]


@dataclass(frozen=True)
class _Attempt:
    kind: AttemptKind
    response: Any = None
    failure: CallResult | None = None
    wait: float | None = None


def read_by(response: Any, deadline: float, timeout: float) -> bytes:
    """The whole body of ``response``, or ``TimeoutError`` once ``deadline`` (a
    ``time.monotonic()``) passes; the connection is closed either way."""
    chunks: list[bytes] = []
    try:
        for chunk in response.iter_bytes():
            chunks.append(chunk)
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:g} s")
    finally:
        response.close()
    return b"".join(chunks)


def model_fingerprint(url: str, model: str, served: Mapping[str, Any]) -> str:
    """16 hex digits identifying (base URL, served name, the server's stable metadata)."""
    blob = json.dumps(
        {"base_url": url, "model": model, "served": served}, sort_keys=True, default=str
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class OpenAIClient:
    """A model on an OpenAI-compatible server, with retries, AIMD and accounting."""

    def __init__(self, model: str, options: HTTPOptions, base_url: str | None = None) -> None:
        self.model = model
        self.base_url = resolve_base_url(options, base_url)
        self.api_key_env = options.api_key_env or "OPENAI_API_KEY"
        self.timeout = options.timeout
        self.policy = RetryPolicy.of(options)
        self.concurrency = options.concurrency
        self.limiter = AdaptiveLimiter(self.concurrency)
        self.price = price_for(model, options)
        self.usage = Usage(cost_usd=0.0 if self.price else None)
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False
        """Set by ``close``: a call still in flight then fails on the closed connection,
        which is this process shutting down (Ctrl-C, SIGTERM), not the server failing."""
        self._probe_lock = threading.Lock()
        self._probed: tuple[dict[str, Any] | None] | UserError | None = None
        self._sdk = openai.OpenAI(
            base_url=self.base_url,
            api_key=resolve_api_key(options, self.base_url),
            max_retries=0,
            timeout=self.timeout,
        )
        self.url = redact(str(self._sdk.base_url).rstrip("/"))
        """The base URL requests go to (``http://host:port/v1``), credentials masked: it
        names the server in messages, ids and keys, none of which may hold a secret."""
        self._server = str(self._sdk.base_url).rstrip("/").removesuffix("/v1")

    @property
    def server(self) -> str:
        """The server's root URL (``base_url`` without ``/v1``), for per-server facts."""
        return redact(self._server)

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
            wait = min(self.timeout, PROBE_TIMEOUT)
            listed = json.loads(self._get("/models", wait)).get("data")
        except UNREACHED as exc:
            raise UserError(
                f"cannot reach {self.url}: {connection_reason(exc, wait)}", field="base_url"
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
            "base_url": redact(self.base_url) if self.base_url else None,
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
            data = json.loads(self._post(path, body))
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
            time.sleep(self.policy.wait(att.wait, attempts - 1))

    # the transport: the raw body of one GET or POST, by the deadline --------------------
    def _get(self, path: str, seconds: float) -> bytes:
        deadline = time.monotonic() + seconds
        options: Any = {"timeout": seconds, "headers": STREAM_BODY}
        raw = self._sdk.get(path, cast_to=_http_lib.Response, options=options)
        return read_by(raw, deadline, seconds)

    def _post(self, path: str, body: dict[str, Any]) -> bytes:
        # The SDK's raw post, read as JSON by the caller: the typed ``create()`` walks the
        # body and builds pydantic models per call, which costs a third of the client's
        # CPU at hundreds of requests per second. Replies are plain dicts.
        deadline = time.monotonic() + self.timeout
        options: Any = {"headers": STREAM_BODY}
        raw = self._sdk.post(path, body=body, cast_to=_http_lib.Response, options=options)
        return read_by(raw, deadline, self.timeout)

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
            kind: AttemptKind = "retry" if retryable(exc.status_code) else "final"
            return _Attempt(
                kind, failure=self._failure(exc), wait=retry_after(exc.response.headers)
            )
        except (*UNREACHED, json.JSONDecodeError, BadReply) as exc:
            return _Attempt("retry", failure=self._failure(exc))
        finally:
            self.limiter.release(throttled=throttled)

    def _failure(self, exc: Exception) -> CallResult:
        status = getattr(exc, "status_code", None)
        if status in (401, 403):
            raise UserError(
                f"{redact(self.base_url or 'the API')} refused the key from "
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
        body = redact(body)
        kind = type(exc).__name__
        if status:
            reason = f"HTTP {status}: {kind}"
        elif isinstance(exc, UNREACHED):
            reason = f"cannot reach {self.url}: {connection_reason(exc, self.timeout)}"
        else:
            reason = kind
        return CallResult(error=reason, status_code=status, body=body)

    def _give_up(self, failure: CallResult) -> CallResult:
        self._count(calls=failure.attempts)
        if self._closed:  # our own shutdown cut the call: the interrupt message says so
            log.debug("%s %s: call cut by close: %s", self.url, self.model, failure.error)
            return failure
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
            self._server + path,
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
        self._closed = True
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self._sdk.close()
