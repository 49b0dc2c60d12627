"""A fault-injecting OpenAI-compatible server on 127.0.0.1, for client and judge tests.

Not a test module: imported by tests/test_http.py, tests/judges/test_llm.py and
bench/p5_judge.py. Run by hand with ``python tests/fault_server.py --latency 0.1``.

Faults are scripted by the request itself, so a test states what each example meets:
a message containing ``[[fault:429,500,ok]]`` gets HTTP 429 on its first attempt, 500 on
its second and a valid reply on its third (the last step repeats). ``[[label:X]]`` sets
the label of a valid judge reply (default ``plausible_followup``). Steps:

- ``ok``: a valid reply; ``429``: rate limited with ``Retry-After``; ``500``, ``400``,
  ``401``: that HTTP error;
- ``timeout``: sleep past the client's timeout, then reply;
- ``drip``: a valid reply sent one byte every ``drip_interval`` seconds, so no single read
  waits long: only a deadline on the whole request stops it;
- ``hold``: keep the request open, unanswered, until ``state.release`` is set (a call in
  flight when its client is killed); the server's first chat request is answered at
  once all the same, since a client detects the request shape with its first call and
  queues the others behind it;
- ``badjson``: HTTP 200 whose message is not JSON; ``offmenu``: a label not on the menu;
- ``garbage``: HTTP 200 whose body is not JSON at all;
- ``thinkdraft``: a ``<think>`` block holding a different draft verdict, then the real
  one; ``thinkonly``: an unclosed ``<think>`` holding a verdict, and nothing after it.

How the server treats request fields, as real servers do:

- ``schema_mode="llamacpp"`` answers ``response_format: json_schema`` with HTTP 500
  naming the field, as llama-cpp-python's server does; ``"openai"`` accepts it (vLLM).
- ``reasoning=True`` refuses chat ``max_tokens`` ("use 'max_completion_tokens'") and any
  ``temperature`` but 1 with HTTP 400 and ``error.param``, as OpenAI's o-series does.
- ``strict_fields=True`` refuses fields that aren't OpenAI parameters
  (``skip_special_tokens``, ``chat_template_kwargs``, ``min_p``...) with HTTP 400
  "Unrecognized request argument supplied", as api.openai.com does.
- ``echo_mode`` for ``/v1/completions`` with ``echo`` and ``logprobs``: ``"openai"``
  returns per-token log-probabilities whose ``text_offset`` index the echoed text
  (tokens from ``fake_tokens``, values from ``fake_logprob``); ``"ignore"`` answers as if
  neither was sent; ``"reject"`` refuses ``echo`` with HTTP 400; ``"shifted"`` returns
  the values one position off, as llama-cpp-python does for prompts without BOS.

Refused requests are not scripted steps: they go to ``state.refused`` (the fields named),
not to ``hits``. ``GET /v1/models`` lists ``models``, each stamped with a fresh
``created`` per request, as vLLM does.
The server stops itself after ``lifetime`` seconds, so a failed test can't leave it behind.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DIRECTIVE = re.compile(r"\[\[fault:([a-z0-9,]+)\]\]")
LABEL = re.compile(r"\[\[label:([a-z_]+)\]\]")
TOKEN = re.compile(r"\s+|\w+|[^\w\s]")
GENERATED = "."
"""The one token an echo request generates (``max_tokens=1``), greedily."""
OPENAI_COMPLETION_FIELDS = frozenset(
    [
        "model",
        "prompt",
        "max_tokens",
        "temperature",
        "top_p",
        "stop",
        "seed",
        "echo",
        "logprobs",
        "n",
        "stream",
        "suffix",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "user",
        "best_of",
    ]
)
OPENAI_CHAT_FIELDS = frozenset(
    [
        "model",
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "stop",
        "seed",
        "response_format",
        "n",
        "stream",
        "tools",
        "tool_choice",
        "logprobs",
        "top_logprobs",
        "user",
        "reasoning_effort",
    ]
)


def fake_tokens(text: str) -> list[str]:
    """The fake tokenizer: runs of whitespace, words, single punctuation marks."""
    return TOKEN.findall(text)


def fake_logprob(token: str) -> float:
    """A token's fake log-probability, fixed by its text (in -5.0 .. -0.1)."""
    return -0.1 - hashlib.sha256(token.encode()).digest()[0] % 50 / 10


@dataclass
class Hit:
    key: str
    attempt: int
    step: str
    at: float
    response_format: str | None
    params: dict[str, Any] = field(default_factory=dict)
    """The request body without its ``messages``/``prompt``."""


@dataclass
class FaultState:
    latency: float = 0.0
    retry_after: str = "1"
    timeout_sleep: float = 3.0
    drip_interval: float = 0.2
    schema_mode: str = "openai"
    reasoning: bool = False
    strict_fields: bool = False
    echo_mode: str = "openai"
    models: list[dict[str, Any]] = field(
        default_factory=lambda: [{"id": "fault-model", "object": "model", "owned_by": "test"}]
    )
    hits: list[Hit] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)
    """Keys of the chat requests that got a valid reply, in the order they were sent."""
    release: threading.Event = field(default_factory=threading.Event)
    refused: list[str] = field(default_factory=list)
    attempts: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_step(self, text: str, fmt: str | None, body: dict[str, Any]) -> tuple[str, str]:
        match = DIRECTIVE.search(text)
        steps = match.group(1).split(",") if match else ["ok"]
        key = hashlib.sha256(text.encode()).hexdigest()[:16]
        params = {k: v for k, v in body.items() if k not in ("messages", "prompt")}
        with self.lock:
            n = self.attempts.get(key, 0)
            self.attempts[key] = n + 1
            step = steps[min(n, len(steps) - 1)]
            self.hits.append(Hit(key, n + 1, step, time.monotonic(), fmt, params))
        return key, step

    def refuse(self, what: str) -> None:
        with self.lock:
            self.refused.append(what)


def _text_of(body: dict[str, Any]) -> str:
    if "messages" in body:
        return "\n".join(str(m.get("content", "")) for m in body["messages"])
    return str(body.get("prompt", ""))


def _verdict(text: str, step: str) -> str:
    match = LABEL.search(text)
    label = match.group(1) if match else "plausible_followup"
    if step == "badjson":
        return "I think this is a follow-up, genuine: yes"
    if step == "offmenu":
        label = "great_question"
    verdict = json.dumps(
        {
            "genuine_followup": label == "plausible_followup",
            "label": label,
            "rationale": f"scripted reply ({step})",
        }
    )
    draft = '{"genuine_followup": false, "label": "other", "rationale": "draft"}'
    if step == "thinkdraft":
        return f"<think>First guess: {draft}. On reflection, no.</think>\n{verdict}"
    if step == "thinkonly":
        return f"<think>Maybe {verdict}, but let me check the context again"
    return verdict


def _unknown_fields(body: dict[str, Any], allowed: frozenset[str]) -> list[str]:
    return sorted(k for k in body if k not in allowed)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out at once, no 40 ms ACK stalls
    server: FaultHTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        if not self.path.endswith("/models"):
            self._send(404, {"detail": "Not Found"})
            return
        data = [{**m, "created": time.time()} for m in self.server.state.models]
        self._send(200, {"object": "list", "data": data})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        state = self.server.state
        if state.latency:
            time.sleep(state.latency)
        if self.path.endswith("/chat/completions"):
            self._chat(body, state)
        elif self.path.endswith("/completions"):
            self._completion(body, state)
        else:
            self._send(404, {"detail": "Not Found"})

    def _fault(self, step: str, state: FaultState) -> bool:
        """Send a transport-level fault; True if one was sent."""
        if step == "429":
            self._send(
                429, {"error": {"message": "rate limited"}}, {"Retry-After": state.retry_after}
            )
        elif step in ("500", "400", "401"):
            self._send(int(step), {"error": {"message": f"injected {step}"}})
        elif step == "garbage":
            self._send_raw(200, b"<html>not json", "application/json")
        elif step == "timeout":
            time.sleep(state.timeout_sleep)
            return False
        elif step == "drip":
            self._drip(json.dumps({"choices": [{"text": "x" * 4000}]}).encode(), state)
        else:
            return False
        return True

    def _refuse(self, state: FaultState, status: int, what: str, error: dict[str, Any]) -> None:
        state.refuse(what)
        self._send(status, {"error": {"type": "invalid_request_error", "code": None, **error}})

    def _refused_fields(
        self, body: dict[str, Any], state: FaultState, allowed: frozenset[str]
    ) -> bool:
        """Refuse fields the way OpenAI does (strict) or llama-cpp-python does (schema)."""
        unknown = _unknown_fields(body, allowed) if state.strict_fields else []
        if unknown:
            message = "Unrecognized request argument supplied: " + ", ".join(unknown)
            self._refuse(state, 400, ",".join(unknown), {"message": message, "param": None})
            return True
        fmt = (body.get("response_format") or {}).get("type")
        if fmt == "json_schema" and state.schema_mode == "llamacpp":
            message = (
                "validation error: ('body', 'response_format', 'type') Input should be "
                "'text' or 'json_object', input: 'json_schema'"
            )
            self._refuse(state, 500, "response_format", {"message": message})
            return True
        return False

    def _refused_by_reasoning_model(self, body: dict[str, Any], state: FaultState) -> bool:
        """OpenAI's o-series: no ``max_tokens``, no temperature but the default."""
        if not state.reasoning:
            return False
        if "max_tokens" in body:
            message = (
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead."
            )
            error = {"message": message, "param": "max_tokens", "code": "unsupported_parameter"}
            self._refuse(state, 400, "max_tokens", error)
            return True
        if "temperature" in body and body["temperature"] != 1:
            message = (
                f"Unsupported value: 'temperature' does not support {body['temperature']} "
                "with this model. Only the default (1) value is supported."
            )
            error = {"message": message, "param": "temperature", "code": "unsupported_value"}
            self._refuse(state, 400, "temperature", error)
            return True
        return False

    def _chat(self, body: dict[str, Any], state: FaultState) -> None:
        if self._refused_fields(body, state, OPENAI_CHAT_FIELDS):
            return
        if self._refused_by_reasoning_model(body, state):
            return
        fmt = (body.get("response_format") or {}).get("type")
        text = _text_of(body)
        key, step = state.next_step(text, fmt, body)
        if step == "hold":
            with state.lock:
                first = not state.answered
            if not first:
                state.release.wait()
        if self._fault(step, state):
            return
        with state.lock:
            state.answered.append(key)
        message = {"role": "assistant", "content": _verdict(text, step)}
        self._send(
            200,
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", ""),
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {
                    "prompt_tokens": len(text) // 4,
                    "completion_tokens": 20,
                    "total_tokens": len(text) // 4 + 20,
                },
            },
        )

    def _completion(self, body: dict[str, Any], state: FaultState) -> None:
        if self._refused_fields(body, state, OPENAI_COMPLETION_FIELDS):
            return
        echo = bool(body.get("echo")) and body.get("logprobs") is not None
        if echo and state.echo_mode == "reject":
            message = "echo is not supported with logprobs on this server"
            self._refuse(state, 400, "echo", {"message": message, "param": "echo"})
            return
        text = _text_of(body)
        _, step = state.next_step(text, None, body)
        if self._fault(step, state):
            return
        if echo and state.echo_mode in ("openai", "shifted"):
            self._send(200, _echo_reply(text, body, shifted=state.echo_mode == "shifted"))
            return
        reply = f"echo {len(text)} seed={body.get('seed')} T={body.get('temperature')}"
        self._send(
            200,
            {
                "id": "x",
                "object": "text_completion",
                "created": 0,
                "model": body.get("model", ""),
                "choices": [{"index": 0, "text": reply, "finish_reason": "stop"}],
                "usage": {
                    "prompt_tokens": len(text) // 4,
                    "completion_tokens": 5,
                    "total_tokens": len(text) // 4 + 5,
                },
            },
        )

    def _drip(self, data: bytes, state: FaultState) -> None:
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            for i in range(len(data)):
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
                time.sleep(state.drip_interval)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up: what the deadline is for

    def _send(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self._send_raw(status, json.dumps(obj).encode(), "application/json", headers)

    def _send_raw(
        self, status: int, data: bytes, ctype: str, headers: dict[str, str] | None = None
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out and left


def _echo_reply(text: str, body: dict[str, Any], shifted: bool) -> dict[str, Any]:
    """``text`` echoed with per-token log-probabilities, plus one greedy token."""
    tokens = [*fake_tokens(text), GENERATED]
    offsets = [sum(len(t) for t in tokens[:i]) for i in range(len(tokens))]
    values: list[float | None] = [fake_logprob(t) for t in tokens]
    if shifted:  # each value belongs to the next token
        values = [*values[1:], -9.0]
    values[0] = None  # the first token has no context
    top: list[dict[str, float] | None] = [
        None if v is None else {tok: v} for tok, v in zip(tokens, values, strict=True)
    ]
    top[-1] = {GENERATED: fake_logprob(GENERATED)}
    return {
        "id": "x",
        "object": "text_completion",
        "created": 0,
        "model": body.get("model", ""),
        "choices": [
            {
                "index": 0,
                "text": text + GENERATED,
                "logprobs": {
                    "tokens": tokens,
                    "token_logprobs": values,
                    "top_logprobs": top,
                    "text_offset": offsets,
                },
                "finish_reason": "length",
            }
        ],
        "usage": {
            "prompt_tokens": len(tokens) - 1,
            "completion_tokens": 1,
            "total_tokens": len(tokens),
        },
    }


class FaultHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def __init__(self, state: FaultState) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.state = state


class FaultServer:
    """Context manager: ``with FaultServer(latency=0.1) as srv: srv.base_url``."""

    def __init__(self, *, lifetime: float = 300.0, **state: Any) -> None:
        self.state = FaultState(**state)
        self.httpd = FaultHTTPServer(self.state)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._timer = threading.Timer(lifetime, self.stop)
        self._timer.daemon = True

    def __enter__(self) -> FaultServer:
        self._thread.start()
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._timer.cancel()
        self.state.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def hits(self) -> list[Hit]:
        with self.state.lock:
            return list(self.state.hits)

    @property
    def answered(self) -> list[str]:
        with self.state.lock:
            return list(self.state.answered)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--schema-mode", default="openai", choices=["openai", "llamacpp"])
    ap.add_argument("--lifetime", type=float, default=600.0)
    args = ap.parse_args()
    with FaultServer(
        latency=args.latency, schema_mode=args.schema_mode, lifetime=args.lifetime
    ) as srv:
        print(srv.base_url, flush=True)
        time.sleep(args.lifetime)


if __name__ == "__main__":
    main()
