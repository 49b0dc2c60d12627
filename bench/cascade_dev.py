"""The cascade's savings and its agreement with the LLM judge judging everything.

On ``../shared/judge_dev.jsonl``, with the embedded model (SmolLM2-135M) served by
llama-cpp-python's OpenAI-compatible server as the LLM judge (its judging quality is not
the point; the mechanics are). Steps:

1. the LLM judge judges every example (T=0, schema-constrained output);
2. the cascade judges the same examples: the offline judge settles the turns that
   ``cascade.settle`` allows (strict evidence, or P(genuine) outside ``LO``/``HI``), the
   rest go to the same LLM judge. Both share one in-memory verdict cache, so
   the cascade's LLM verdicts are the LLM-all verdicts (T=0 on one server is
   deterministic) and its real calls are only cache hits, counted separately;
3. report calls saved, agreement (σ and label) of the cascade with LLM-all, and both
   against the reference labels for context.

The shipped offline judge was fit on judge_dev among the rest, so on this file its
verdicts are in-sample: the share it settles, and how often a settled verdict matches the
reference, read higher here than on new turns. The honest, out-of-fold figures are
``bench/cascade_oof.py``'s; this script checks the mechanics with a real LLM server.

Run: ``.venv/bin/python bench/cascade_dev.py [--forwarded-every K] [--max-chars N]
[--threads T]``. By default every example is judged. To fit a time budget on a slow
machine, ``--forwarded-every K`` keeps every example the offline judge settles (the only
ones where the cascade and LLM-all can differ) and every K-th of those it forwards; the
JSON then gives the agreement on that subset and ``cascade_vs_llm_all_full_est``, the
agreement on all examples, counting the unjudged forwarded ones as agreeing: the cascade
sends them to the same judge at T=0 on the same server, which returns the same verdict
(the T=0 and KV-reuse checks in tests/backends/test_openai.py). Last line: JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from userturn import assets
from userturn.analysis.agree import LabelRow, agreement
from userturn.judges import load_judge
from userturn.judges.cascade import settle
from userturn.types import JudgeInput, Judgment

DEV = Path(__file__).resolve().parents[2] / "shared" / "judge_dev.jsonl"


class DictCache:
    def __init__(self) -> None:
        self.data: dict[str, dict[str, Any]] = {}
        self.hits = 0

    def cache_get(self, key: str) -> dict[str, Any] | None:
        hit = self.data.get(key)
        self.hits += hit is not None
        return hit

    def cache_put(self, key: str, data: dict[str, Any]) -> None:
        self.data[key] = data


def start_server(threads: int) -> tuple[subprocess.Popen[bytes], str]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(assets.fetch(assets.SMOLLM2)),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "4096",
        "--n_threads",
        str(threads),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(600):
        try:
            urllib.request.urlopen(url + "/models", timeout=2)
            return proc, url
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise TimeoutError("llama.cpp server did not start")


def rows_of(verdicts: list[Judgment], ids: list[str]) -> dict[str, LabelRow]:
    return {
        i: LabelRow(i, v.genuine, v.label, v.status) for i, v in zip(ids, verdicts, strict=True)
    }


def summary(res: dict[str, Any]) -> dict[str, Any]:
    return {k: res[k] for k in ("n", "agreement", "kappa", "label_agreement", "label_kappa")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dev", type=Path, default=DEV)
    ap.add_argument("--forwarded-every", type=int, default=1)
    ap.add_argument("--max-chars", type=int, default=6000)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    everything = [json.loads(x) for x in args.dev.open()]
    settled_ids = offline_settled(everything)
    forwarded = [r for r in everything if r["id"] not in settled_ids]
    keep = settled_ids | {r["id"] for r in forwarded[:: args.forwarded_every]}
    dev = [r for r in everything if r["id"] in keep]
    inputs = [JudgeInput.of_row(r) for r in dev]
    ids = [r["id"] for r in dev]
    reference = {r["id"]: LabelRow(r["id"], r["genuine_followup"], r["label"], "ok") for r in dev}
    proc, url = start_server(args.threads)
    try:
        cache = DictCache()
        # one request at a time: llama-cpp-python's server decodes one at a time anyway, and
        # the client's default 64 in flight queue there past the request timeout and retry
        spec = (
            f"openai:smollm2?base_url={url}&max_chars={args.max_chars}"
            f"&max_tokens={args.max_tokens}&concurrency=1&timeout=600"
        )
        start = time.perf_counter()
        llm = load_judge(f"llm:{spec}", cache=cache)
        llm_all = llm.judge(inputs)
        llm_secs = time.perf_counter() - start
        cascade = load_judge(f"cascade:{spec}", cache=cache)
        hits_before = cache.hits
        casc = cascade.judge(inputs)
        llm.close()
        cascade.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    a, c = rows_of(llm_all, ids), rows_of(casc, ids)
    out = {
        "cascade_dev_n": len(inputs),
        "cascade_dev_total": len(everything),
        "cascade_dev_forwarded_every": args.forwarded_every,
        "cascade_calls_saved_share_full": round(len(settled_ids) / len(everything), 3),
        "cascade_calls_saved": cascade.calls_saved(),
        "cascade_calls_saved_share": round(cascade.calls_saved() / len(inputs), 3),
        "cascade_llm_calls": len(inputs) - cascade.calls_saved(),
        "cascade_cache_hits": cache.hits - hits_before,
        "cascade_vs_llm_all": summary(agreement(c, a, reps=0)),
        "llm_all_vs_reference": summary(agreement(a, reference, reps=0)),
        "cascade_vs_reference": summary(agreement(c, reference, reps=0)),
        "llm_all_unparseable": sum(v.status == "unparseable" for v in llm_all),
        "llm_all_errors": sum(v.status == "error" for v in llm_all),
        "llm_all_seconds": round(llm_secs, 1),
    }
    settled = [r for r, v in zip(dev, casc, strict=True) if v.usage.get("settled_by") == "offline"]
    out["cascade_settled_reference_genuine"] = sum(r["genuine_followup"] for r in settled)
    differ = sum(c[i].ok and a[i].ok and c[i].genuine != a[i].genuine for i in ids)
    out["cascade_vs_llm_all_full_est"] = round(1 - differ / len(everything), 3)
    print(json.dumps(out))


def offline_settled(rows: list[dict[str, Any]]) -> set[str]:
    """Ids the cascade settles without the LLM: the shipped offline judge's verdicts put
    through the cascade's own ``settle`` (free to compute on every row)."""
    offline = load_judge("offline")
    inputs = [JudgeInput.of_row(r) for r in rows]
    return {
        i.id for i, v in zip(inputs, offline.judge(inputs), strict=True) if settle(i, v) is not None
    }


if __name__ == "__main__":
    main()
