"""P6: aggregate 100k synthetic records into summary cells (target ≤ 10 s, ≤ 1 GB RSS).

Run: ``.venv/bin/python bench/p6_aggregate.py [--records N]``. The last line is JSON with
``p6_aggregate_seconds`` and ``p6_aggregate_rss_mb`` (plus context keys).

The store is built with the real Store API (``put_answer``/``put_user_turn``/
``put_judgment``) inside one transaction, with record sizes like a real run's (question,
answer and user turn text, the context messages). Aggregation then runs in a fresh
subprocess so that its peak RSS is its own, not the builder's: it calls the real
``summary_cells`` (what every ``userturn run`` writes to summary.json), and, as an extra
figure, the report's full ``analyze`` (deltas, label shares, correlations).
``p6_aggregate_cpu_seconds`` is the CPU time of the same call: on a shared, overloaded
machine the wall time mostly measures the other tenants.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from userturn.types import LABELS

MODELS = ["qwen3.5-0.8b", "qwen3.5-9b", "gpt-oss-20b", "glm-4.7", "smollm2-135m"]
DATASETS = ["gsm8k", "ifbench"]
TEMPS = [0.0, 0.3, 0.7, 1.0]
PERTS = ["none", "truncate:0.5", "append-question:Does that make sense?"]
K = 3


def build(path: Path, n_records: int, seed: int = 0) -> int:
    from userturn.rundir.keys import content_key
    from userturn.rundir.records import AnswerRecord, UserTurnRecord
    from userturn.rundir.store import Store

    rng = random.Random(seed)
    per_item = len(MODELS) * len(DATASETS) * len(PERTS) * sum(1 if t == 0 else K for t in TEMPS)
    n_items = -(-n_records // per_item)
    q = "Natalia sold clips to 48 of her friends in April, and then she sold half. " * 3
    a = "Let's think step by step. In May she sold 48 / 2 = 24 clips. " * 8
    msgs = ({"role": "user", "content": q}, {"role": "assistant", "content": a})
    written = 0
    with Store(path) as store, store.transaction():
        for model in MODELS:
            fam = model.split("-")[0].split(".")[0]
            for ds in DATASETS:
                for i in range(n_items):
                    item = f"{ds}-{i}"
                    akey = content_key(model, item, "answer")
                    correct = rng.random() < 0.6
                    store.put_answer(
                        AnswerRecord(akey, item, ds, model, "c", a, a, "stop", correct=correct)
                    )
                    for pert in PERTS:
                        for t in TEMPS:
                            for s in range(1 if t == 0 else K):
                                key = content_key(model, item, pert, t, s)
                                turn = UserTurnRecord(
                                    key, akey, item, model, ds, "c", t, s, s, pert, msgs,
                                    family=fam, user_turn=q[:160], user_finish="stop",
                                    prompt_sha=key,
                                )  # fmt: skip
                                store.put_user_turn(turn)
                                _judge(store, rng, key)
                                written += 1
    return written


def _judge(store: Any, rng: random.Random, key: str) -> None:
    from userturn.types import Judgment

    if rng.random() < 0.02:
        store.put_judgment(key, Judgment("rules", None, None, "could not parse", "unparseable"))
        return
    label = rng.choice(LABELS)
    store.put_judgment(key, Judgment("rules", label == "plausible_followup", label, "synthetic"))


def aggregate(path: Path) -> dict[str, float]:
    from userturn.analysis.cells import summary_cells
    from userturn.analysis.views import analyze
    from userturn.rundir.store import Store

    store = Store(path)
    t0, c0 = time.perf_counter(), time.process_time()
    cells = summary_cells(store)
    t1, c1 = time.perf_counter(), time.process_time()
    analyze(store)
    t2 = time.perf_counter()
    store.close()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "p6_aggregate_seconds": round(t1 - t0, 3),
        "p6_aggregate_rss_mb": round(rss_mb, 1),
        "p6_aggregate_cpu_seconds": round(c1 - c0, 3),
        "p6_analyze_seconds": round(t2 - t1, 3),
        "p6_cells": len(cells),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--aggregate", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.aggregate:
        print(json.dumps(aggregate(args.aggregate)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "store.sqlite"
        t0 = time.perf_counter()
        n = build(path, args.records)
        built = time.perf_counter() - t0
        print(f"built {n} synthetic records in {built:.1f}s", file=sys.stderr)
        proc = subprocess.run(
            [sys.executable, __file__, "--aggregate", str(path)],
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(proc.stdout.strip().splitlines()[-1])
    print(json.dumps({**result, "p6_records": n, "p6_build_seconds": round(built, 1)}))


if __name__ == "__main__":
    main()
