"""The Ray executor on a local 2-worker Ray cluster (CPU) with the embedded SmolLM2.

Run: ``.venv/bin/python -m pytest tests/test_ray_executor.py -q`` (about a minute on an
idle 2-core machine: one Ray cluster for the module, 2 gsm8k items, tiny token budgets).
Checks: same records as the local executor at T=0 and at T>0 with fixed seeds; resume
across executors (a partial local run finished by Ray generates only what is missing);
deterministic sharding; a UserError on an actor comes back as a UserError.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from userturn.config import build_config  # noqa: E402
from userturn.errors import UserError  # noqa: E402
from userturn.run.driver import run  # noqa: E402
from userturn.run.executors.ray import chunk_plan  # noqa: E402

BASE: dict[str, Any] = {
    # One llama.cpp thread per worker: on a shared 2-core box, spinning threads starve.
    "models": ["smollm2-135m?n_threads=1"],
    "datasets": ["gsm8k"],
    "limit": 2,
    "temperatures": [0.0, 1.0],
    "samples": 2,
    "judges": [],
    "seed": 7,
    "max_answer_tokens": 16,
    "max_user_tokens": 8,
}
SAME = (
    "id",
    "item_id",
    "temperature",
    "sample",
    "seed",
    "answer",
    "answer_finish",
    "user_turn",
    "user_finish",
    "prompt_sha",
    "template_sha",
    "messages",
)


@pytest.fixture(scope="module")
def cluster(smollm2_path: Path) -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def records(out: Path) -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    return {r["id"]: {k: r[k] for k in SAME} for r in rows}


def stats(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "run_stats.json").read_text())
    return data


def test_chunk_plan_is_the_local_chunking() -> None:
    assert chunk_plan([3, 2], 2, 2) == [(0, 0, 2, 0), (0, 2, 3, 1), (1, 0, 2, 0)]
    assert chunk_plan([3], 1, 2) == [(0, 0, 1, 0), (0, 1, 2, 1), (0, 2, 3, 0)]


def test_ray_matches_local_and_resumes(cluster: None, tmp_path: Path) -> None:
    local = run(build_config(BASE), tmp_path / "local").out
    ray_out = run(build_config({**BASE, "executor": "ray", "workers": 2}), tmp_path / "ray").out
    want = records(local)
    assert len(want) == 2 * (1 + 2)  # T=0 one sample, T=1 two samples, per item
    assert records(ray_out) == want
    man = (ray_out / "manifest.yaml").read_text()
    assert "executor: ray" in man and "workers: 2" in man

    partial = tmp_path / "partial"
    run(build_config({**BASE, "limit": 1}), partial)  # "killed" after 1 item, locally
    done = run(build_config({**BASE, "executor": "ray", "workers": 2}), partial)
    assert (done.stats.generated, done.stats.reused) == (3, 3)
    assert (done.stats.answers_generated, done.stats.answers_reused) == (1, 1)
    assert records(partial) == want
    again = run(build_config({**BASE, "executor": "ray", "workers": 2}), partial)
    assert (again.stats.generated, again.stats.model_calls) == (0, 0)


def test_user_error_on_an_actor_is_a_user_error(cluster: None, tmp_path: Path) -> None:
    cfg = build_config(
        {
            **BASE,
            "models": [f"llamacpp:{tmp_path / 'missing.gguf'}"],
            "executor": "ray",
            "workers": 1,
            "limit": 1,
        }
    )
    with pytest.raises(UserError, match="GGUF file not found"):
        run(cfg, tmp_path / "bad")
