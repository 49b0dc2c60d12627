"""P5: LLM-judge throughput against a local server with 100 ms injected latency.

A judge at concurrency 64 against a server that takes 100 ms per request can at best do
640 judgments/s; ``p5_judge_throughput_ratio`` is the achieved rate ÷ 640 (goal ≥ 0.8).
The server is tests/fault_server.py in its own process (so it doesn't share our GIL),
replying with valid verdicts; the judge runs with its cache off, so every judgment is a
real HTTP request through the OpenAI SDK, the retry loop, the AIMD limiter and the
lenient parser.

Run: ``.venv/bin/python bench/p5_judge.py [--n 3200] [--latency 0.1] [--concurrency 64]``.
Last line: JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from userturn.judges import load_judge
from userturn.types import JudgeInput

REPO = Path(__file__).resolve().parents[1]


def start_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "tests" / "fault_server.py"),
            "--latency",
            str(latency),
            "--lifetime",
            "300",
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3200)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--concurrency", type=int, default=64)
    args = ap.parse_args()
    proc, url = start_server(args.latency)
    try:
        judge = load_judge(
            f"llm:openai:bench?base_url={url}&cache=off&concurrency={args.concurrency}"
        )
        judge.judge(inputs(args.concurrency))  # warm: format detection, connection pool
        batch = inputs(args.n)
        start = time.perf_counter()
        out = judge.judge(batch)
        secs = time.perf_counter() - start
        judge.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    ok = sum(j.status == "ok" for j in out)
    ideal = args.concurrency / args.latency
    rate = ok / secs
    print(
        f"{ok}/{len(out)} ok in {secs:.2f}s: {rate:.0f}/s vs ideal {ideal:.0f}/s", file=sys.stderr
    )
    print(
        json.dumps(
            {
                "p5_judge_throughput_ratio": round(rate / ideal, 3),
                "p5_judge_per_s": round(rate, 1),
                "p5_judge_n": len(out),
                "p5_judge_ok": ok,
            }
        )
    )


if __name__ == "__main__":
    main()
