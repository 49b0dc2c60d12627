"""The Ray executor on a local 2-worker Ray cluster (CPU) with the embedded SmolLM2.

Run: ``.venv/bin/python -m pytest tests/test_ray_executor.py -q`` (about a minute on an
idle 2-core machine: one Ray cluster for the module, 2 gsm8k items, tiny token budgets).
Checks: same records as the local executor at T=0 and at T>0 with fixed seeds; resume
across executors (a partial local run finished by Ray generates only what is missing);
the likelihood probe and rollouts (best-of, steered by a judge loaded on each actor)
give the local run's records and cells; deterministic sharding; a UserError on an actor
comes back as a UserError.
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


def outputs(out: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """records.jsonl and summary.json, whole, but for the prompt tokens llama.cpp reused
    from its cache (an actor's cache has seen other items than the local backend's)."""
    lines = (out / "records.jsonl").read_text().splitlines()
    rows = [
        {k: v for k, v in json.loads(line).items() if not k.endswith("prompt_tokens_reused")}
        for line in lines
    ]
    summary = json.loads((out / "summary.json").read_text())
    return rows, summary


def counts(stats: Any) -> tuple[int, ...]:
    return (stats.generated, stats.reused, stats.model_calls, stats.judged, stats.judge_calls)


def _conversations(path: Path) -> Path:
    """Three short held-out conversations with real next turns (healthbench's are long:
    a CPU shared by Ray actors scores them in minutes, these in seconds)."""
    rows = [
        ("a", "Name a prime number.", "7 is prime.", "Is 9 prime too?"),
        ("b", "Say hello in French.", "Bonjour.", "And in Spanish?"),
        ("c", "What colour is the sky?", "Blue, by day.", "Why is it blue?"),
    ]
    lines = [
        json.dumps(
            {
                "id": i,
                "messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}],
                "reference_turn": ref,
            }
        )
        for i, q, a, ref in rows
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_likelihood_on_ray_equals_the_local_run(cluster: None, tmp_path: Path) -> None:
    data = _conversations(tmp_path / "talk.jsonl")
    cfg = {**BASE, "datasets": [f"jsonl:{data}"], "probe": "likelihood", "limit": 3}
    local = run(build_config(cfg), tmp_path / "local")
    on_ray = run(build_config({**cfg, "executor": "ray", "workers": 2}), tmp_path / "ray")
    rows, summary = outputs(local.out)
    assert rows and all(r["probe"] == "likelihood" for r in rows)
    assert outputs(on_ray.out) == (rows, summary)
    assert on_ray.stats.extra["likelihood_scored"] == local.stats.extra["likelihood_scored"]


def test_rollout_on_ray_equals_the_local_run_and_resumes(cluster: None, tmp_path: Path) -> None:
    """Best-of-2 over 2 turns: the steering judge runs on each actor, its verdicts and
    every turn are stored by the driver, and the scoring judge runs after."""
    cfg = {
        **BASE,
        "probe": "rollout",
        "temperatures": [1.0],
        "samples": 1,
        "turns": 2,
        "best_of": 2,
        "judges": ["offline", "rules"],
    }
    local = run(build_config(cfg), tmp_path / "local")
    on_ray = run(build_config({**cfg, "executor": "ray", "workers": 2}), tmp_path / "ray")
    rows, summary = outputs(local.out)
    assert len(rows) == 2 * 2 and {r["turn"] for r in rows} == {1, 2}
    assert all(len(r["judgments"]) == 2 for r in rows)
    assert outputs(on_ray.out) == (rows, summary)
    assert counts(on_ray.stats) == counts(local.stats)
    again = run(build_config({**cfg, "executor": "ray", "workers": 2}), tmp_path / "ray")
    assert (again.stats.generated, again.stats.model_calls, again.stats.reused) == (0, 0, 4)
    assert outputs(on_ray.out) == (rows, summary)
