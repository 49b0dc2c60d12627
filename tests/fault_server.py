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
- ``badjson``: HTTP 200 whose message is not JSON; ``offmenu``: a label not on the menu;
- ``garbage``: HTTP 200 whose body is not JSON at all.

``schema_mode="llamacpp"`` answers ``response_format: json_schema`` with HTTP 500 naming
the field, as llama-cpp-python's server does; ``"openai"`` accepts it, as vLLM does.
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


@dataclass
class Hit:
    key: str
    attempt: int
    step: str
    at: float
    response_format: str | None


@dataclass
class FaultState:
    latency: float = 0.0
    retry_after: str = "1"
    timeout_sleep: float = 3.0
    schema_mode: str = "openai"
    hits: list[Hit] = field(default_factory=list)
    attempts: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_step(self, text: str, fmt: str | None) -> tuple[str, str]:
        match = DIRECTIVE.search(text)
        steps = match.group(1).split(",") if match else ["ok"]
        key = hashlib.sha256(text.encode()).hexdigest()[:16]
        with self.lock:
            n = self.attempts.get(key, 0)
            self.attempts[key] = n + 1
            step = steps[min(n, len(steps) - 1)]
            self.hits.append(Hit(key, n + 1, step, time.monotonic(), fmt))
        return key, step


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
    return json.dumps(
        {
            "genuine_followup": label == "plausible_followup",
            "label": label,
            "rationale": f"scripted reply ({step})",
        }
    )


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out at once, no 40 ms ACK stalls
    server: FaultHTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._send(200, {"object": "list", "data": [{"id": "fault-model", "object": "model"}]})

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
        else:
            return False
        return True

    def _chat(self, body: dict[str, Any], state: FaultState) -> None:
        fmt = (body.get("response_format") or {}).get("type")
        if fmt == "json_schema" and state.schema_mode == "llamacpp":
            self._send(
                500,
                {
                    "error": {
                        "message": "validation error: ('body', "
                        "'response_format', 'type') Input should be 'text' "
                        "or 'json_object', input: 'json_schema'"
                    }
                },
            )
            return
        text = _text_of(body)
        _, step = state.next_step(text, fmt)
        if self._fault(step, state):
            return
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
        text = _text_of(body)
        _, step = state.next_step(text, None)
        if self._fault(step, state):
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
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def hits(self) -> list[Hit]:
        with self.state.lock:
            return list(self.state.hits)


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
