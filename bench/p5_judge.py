"""P5: LLM-judge throughput against a local server with 100 ms injected latency.

A judge at concurrency 64 against a server that takes 100 ms per request can at best do
640 judgments/s; ``p5_judge_throughput_ratio`` is the achieved rate ÷ 640 (goal ≥ 0.8).
The server is tests/fault_server.py in its own process (so it doesn't share our GIL),
replying with valid verdicts; the judge runs with its cache off, so every judgment is a
real HTTP request through the OpenAI SDK, the retry loop, the AIMD limiter and the
lenient parser.

``--transports`` measures other ways of sending the same requests, in turns on the same
server, against the client's own (``sync-pool``: the synchronous SDK, each pool thread
sending its own requests): ``async-aiohttp``, the SDK's ``AsyncOpenAI`` on one event loop
over aiohttp, with callers on the pool's threads and each request's I/O on the loop, and
``async-httpx``, the same over httpx. Everything else (retries, limiter, parser) is the
client's own.

Run: ``.venv/bin/python bench/p5_judge.py [--n 3200] [--latency 0.1] [--concurrency 64]
[--transports sync-pool,async-aiohttp,async-httpx] [--rounds 1]``. Last line: JSON (the
first transport's figures under the ``p5_`` keys, every ratio measured under ``p5_by``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import openai

import userturn.http.client as http_client
from userturn.judges import load_judge
from userturn.types import JudgeInput

REPO = Path(__file__).resolve().parents[1]
T = TypeVar("T")


def start_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "tests" / "fault_server.py"),
            "--latency",
            str(latency),
            "--lifetime",
            "900",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def inputs(n: int) -> list[JudgeInput]:
    q = {
        "role": "user",
        "content": "A train leaves at 3pm going 60 km/h. When does it arrive 150 km away?",
    }
    a = {"role": "assistant", "content": "It takes 150 / 60 = 2.5 hours, so 5:30pm."}
    return [
        JudgeInput(f"b{i}", (q, a), f"[[label:plausible_followup]] Why 2.5 h? #{i}")
        for i in range(n)
    ]


class _Loop:
    """One event loop on a daemon thread, for the life of a client: any thread hands it
    a coroutine and waits (one loop and one connection pool stay warm across calls)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self, final: Coroutine[Any, Any, Any]) -> None:
        self.run(final)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


async def _read_by(send: Callable[[], Awaitable[Any]], seconds: float) -> bytes:
    """The raw reply's whole body, or ``TimeoutError`` ``seconds`` after the start."""
    async with asyncio.timeout(seconds):
        response = await send()
        try:
            body: bytes = await response.aread()
        finally:
            await response.aclose()
    return body


class AsyncLoopClient(http_client.OpenAIClient):
    """The client with each request's I/O on one ``AsyncOpenAI`` on one event loop
    (callers stay on the pool's threads), over aiohttp or httpx, with as many pooled
    connections as requests in flight."""

    aiohttp = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        n = self.concurrency
        limits = http_client._http_lib.Limits(max_connections=n, max_keepalive_connections=n)
        make = openai.DefaultAioHttpClient if self.aiohttp else openai.DefaultAsyncHttpxClient
        self._io = _Loop()
        self._async = openai.AsyncOpenAI(
            base_url=str(self._sdk.base_url),
            api_key=self._sdk.api_key,
            max_retries=0,
            timeout=self.timeout,
            http_client=make(limits=limits, timeout=self.timeout),
        )

    def _get(self, path: str, seconds: float) -> bytes:
        options: Any = {"timeout": seconds, "headers": http_client.STREAM_BODY}

        def send() -> Awaitable[Any]:
            return self._async.get(path, cast_to=http_client._http_lib.Response, options=options)

        return self._io.run(_read_by(send, seconds))

    def _post(self, path: str, body: dict[str, Any]) -> bytes:
        options: Any = {"headers": http_client.STREAM_BODY}

        def send() -> Awaitable[Any]:
            return self._async.post(
                path, body=body, cast_to=http_client._http_lib.Response, options=options
            )

        return self._io.run(_read_by(send, self.timeout))

    def close(self) -> None:
        super().close()
        self._io.close(self._async.close())


class AsyncHttpxClient(AsyncLoopClient):
    aiohttp = False


TRANSPORTS: dict[str, type[http_client.OpenAIClient]] = {
    "sync-pool": http_client.OpenAIClient,
    "async-aiohttp": AsyncLoopClient,
    "async-httpx": AsyncHttpxClient,
}


@contextmanager
def transport(name: str) -> Iterator[None]:
    """The judge's client sends its requests the way ``name`` says, inside the block."""
    import userturn.judges.llm as llm

    if name not in TRANSPORTS:
        raise SystemExit(f"unknown transport {name!r}: one of {', '.join(TRANSPORTS)}")
    saved = llm.OpenAIClient
    llm.OpenAIClient = TRANSPORTS[name]  # type: ignore[misc]
    try:
        yield
    finally:
        llm.OpenAIClient = saved  # type: ignore[misc]


def measure(name: str, url: str, n: int, concurrency: int) -> dict[str, float]:
    with transport(name):
        judge = load_judge(f"llm:openai:bench?base_url={url}&cache=off&concurrency={concurrency}")
    try:
        judge.judge(inputs(concurrency))  # warm: format detection, connection pool
        start = time.perf_counter()
        out = judge.judge(inputs(n))
        secs = time.perf_counter() - start
    finally:
        judge.close()
    ok = sum(j.status == "ok" for j in out)
    return {"secs": secs, "ok": ok, "n": len(out), "per_s": ok / secs}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3200)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--transports", default="sync-pool")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    names = args.transports.split(",")
    ideal = args.concurrency / args.latency
    proc, url = start_server(args.latency)
    by: dict[str, list[float]] = {name: [] for name in names}
    first: dict[str, float] = {}
    try:
        for _ in range(args.rounds):
            for name in names:  # in turns, so load on the machine hits each alike
                got = measure(name, url, args.n, args.concurrency)
                first = first or got
                by[name].append(round(got["per_s"] / ideal, 3))
                print(
                    f"{name}: {got['ok']:.0f}/{got['n']:.0f} ok in {got['secs']:.2f}s: "
                    f"{got['per_s']:.0f}/s vs ideal {ideal:.0f}/s",
                    file=sys.stderr,
                )
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    print(
        json.dumps(
            {
                "p5_judge_throughput_ratio": round(first["per_s"] / ideal, 3),
                "p5_judge_per_s": round(first["per_s"], 1),
                "p5_judge_n": first["n"],
                "p5_judge_ok": first["ok"],
                "p5_by": by,
            }
        )
    )


if __name__ == "__main__":
    main()
