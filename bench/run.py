"""``make bench``: run every benchmark script and print one merged JSON object last.

Each ``bench/<name>.py`` prints its figures as a JSON object on its last line. Scripts run
one after another (never in parallel: the figures are ratios measured side by side inside
one script, and a second script on the same 2 cores would skew them).

``judge_crossencoder`` is not in ``ORDER``: it fine-tunes an encoder for about 80 minutes
and needs the ``hf`` extra, so it runs only when named. ``judge_lm_likelihood`` is not in
it either: scoring every reference turn with SmolLM2 takes about 65 minutes.

Run: ``.venv/bin/python bench/run.py [name ...]``
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ORDER = [
    "core",
    "judge_offline",
    "judge_alternatives",
    "p5_judge",
    "p6_aggregate",
    "p8_batched",
    "p9_likelihood",
    "interval_coverage",
    "p3_transformers",
    "cascade_oof",
    "cascade_dev",
    "judge_prior_shift",
    "judge_people_cut",
    "correction_heldout",
    "correction_posterior",
]


def run_one(name: str) -> dict[str, object]:
    script = HERE / f"{name}.py"
    if not script.is_file():
        return {}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    secs = time.perf_counter() - start
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        print(f"bench {name}: FAILED ({proc.returncode}) {' | '.join(tail)}", file=sys.stderr)
        return {f"{name}_failed": True}
    print(f"bench {name}: {secs:.0f}s {lines[-1]}", file=sys.stderr)
    result: dict[str, object] = json.loads(lines[-1])
    return result


def main(names: list[str]) -> None:
    merged: dict[str, object] = {}
    for name in names or ORDER:
        merged.update(run_one(name))
    print(json.dumps(merged))


if __name__ == "__main__":
    main(sys.argv[1:])
