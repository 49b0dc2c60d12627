"""Training on a GPU machine: SFT and DPO at a real (small) scale, then before/after.

Run on a GPU machine: ``.venv/bin/python -m pytest tests/gpu/test_train_gpu.py -m gpu -q``.
Skipped without CUDA. ``USERTURN_GPU_TRAIN_MODEL`` picks the model (default: the
embedded SmolLM2, since GPU machines may be offline; e.g. a local Qwen folder or
``Qwen/Qwen2.5-1.5B-Instruct`` with Hub access). The before/after uses vLLM when it is
installed (``--eval-backend vllm``, the adapter served as a LoRA) and the hf backend
otherwise. Budget: a few minutes on one H100-class GPU for a 2B model.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
pytest.importorskip("trl")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

from userturn.cli import main  # noqa: E402
from userturn.train.pairs import extract_pairs, run_records  # noqa: E402

MODEL = os.environ.get("USERTURN_GPU_TRAIN_MODEL", "smollm2-135m")
BACKEND = "vllm" if importlib.util.find_spec("vllm") else "hf"


def cli(*args: str) -> None:
    assert main(list(args)) == 0, f"userturn {' '.join(args)} failed"


def finite_losses(out: Path, steps: int) -> list[float]:
    meta = json.loads((out / "train.json").read_text())
    losses = [e["loss"] for e in meta["losses"]]
    assert meta["steps"] == steps and len(losses) == steps
    assert all(math.isfinite(x) for x in losses), losses
    return losses


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("gpu_train")
    (base / "eval.yaml").write_text(
        yaml.safe_dump(
            {
                "datasets": ["gsm8k"],
                "limit": 8,
                "temperatures": [0.0, 1.0],
                "samples": 4,
                "judges": ["rules"],
                "max_answer_tokens": 256,
                "max_user_tokens": 64,
            }
        )
    )
    return base


def test_sft_user_loss_on_gpu_learns_and_evaluates(workdir: Path) -> None:
    out = workdir / "sft"
    cli(
        "train",
        "sft",
        "--model",
        f"hf:{MODEL}",
        "--data",
        "sharegpt",
        "--loss-on",
        "user",
        "--max-steps",
        "40",
        "--max-examples",
        "640",
        "--max-length",
        "1024",
        "--batch-size",
        "8",
        "--learning-rate",
        "2e-4",
        "--out",
        str(out),
        "--eval",
        "--eval-config",
        str(workdir / "eval.yaml"),
        "--eval-backend",
        BACKEND,
    )
    losses = finite_losses(out, 40)
    assert sum(losses[-10:]) / 10 < sum(losses[:10]) / 10, losses  # 40 steps do learn
    rows = json.loads((out / "eval" / "comparison.json").read_text())["rows"]
    assert {r["temperature"] for r in rows} == {0.0, 1.0}
    assert all(r["n_a"] > 0 and r["n_b"] > 0 for r in rows)


def test_dpo_on_self_play_pairs_from_a_gpu_probe_run(workdir: Path) -> None:
    probe = workdir / "probe"
    cli(
        "run",
        "--model",
        f"{BACKEND}:{MODEL}",
        "--dataset",
        "gsm8k",
        "--limit",
        "24",
        "--temperatures",
        "1.0",
        "--samples",
        "8",
        "--judge",
        "rules",
        "--max-answer-tokens",
        "256",
        "--max-user-tokens",
        "64",
        "--out",
        str(probe),
    )
    pairs, stats = extract_pairs(run_records(probe), "rules")
    assert 0 < stats.genuine + stats.rejected + stats.not_ok <= 24 * 8
    if not pairs:
        pytest.fail(f"no context with both a genuine and a degenerate turn: {stats}")
    out = workdir / "dpo"
    cli(
        "train",
        "dpo",
        "--model",
        f"hf:{MODEL}",
        "--from-run",
        str(probe),
        "--max-steps",
        "20",
        "--batch-size",
        "4",
        "--learning-rate",
        "5e-5",
        "--out",
        str(out),
        "--eval",
        "--eval-config",
        str(workdir / "eval.yaml"),
        "--eval-backend",
        BACKEND,
    )
    finite_losses(out, 20)
    comp = json.loads((out / "eval" / "comparison.json").read_text())
    # eval items are gsm8k's first 8 and the pairs came from the first 24: the overlap
    # is reported exactly
    items = json.loads((out / "train.json").read_text())["data"]["items"]  # "gsm8k/gsm8k-N"
    first = _first_ids(8)
    assert comp["train_eval_overlap"] == sorted(
        i for i in items if int(i.rsplit("-", 1)[1]) in first
    )


def _first_ids(n: int) -> set[int]:
    from userturn.datasets import load_dataset

    return {int(it.id.rsplit("-", 1)[1]) for it in load_dataset("gsm8k").load()[:n]}
