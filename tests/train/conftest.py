"""Fixtures for the training tests: one real probe run, one SFT and one DPO training.

Each is built once per session on the embedded SmolLM2 with tiny budgets (2-3 steps,
sequences <= 256 tokens, a handful of examples), so the whole folder stays within a few
minutes on a 2-core CPU. Run: ``.venv/bin/python -m pytest tests/train -q``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("trl")
pytest.importorskip("peft")

from userturn.cli import main

CONVERSATIONS = [
    {
        "messages": [
            {"role": "user", "content": "What is the capital of France?"},
            {"role": "assistant", "content": "The capital of France is Paris."},
            {"role": "user", "content": "And how many people live there?"},
            {"role": "assistant", "content": "About 2.1 million in the city proper."},
        ]
    },
    {
        "conversations": [
            {"from": "human", "value": "Give me a synonym for happy."},
            {"from": "gpt", "value": "Joyful."},
            {"from": "human", "value": "Can you use it in a sentence?"},
        ]
    },
    {
        "messages": [
            {"role": "user", "content": "Write a haiku about rain."},
            {
                "role": "assistant",
                "content": "Soft rain on the roof\nwhispers to the town\npuddles hold the sky",
            },
            {"role": "user", "content": "Now make it about snow instead."},
        ]
    },
    {
        "messages": [
            {"role": "user", "content": "How do I reverse a list in Python?"},
            {"role": "assistant", "content": "Use my_list[::-1] or my_list.reverse()."},
            {"role": "user", "content": "What's the difference between the two?"},
        ]
    },
]
PROBE = {
    "models": ["smollm2-135m"],
    "datasets": ["gsm8k"],
    "limit": 2,
    "temperatures": [1.0],
    "samples": 4,
    "judges": ["rules"],
    "max_answer_tokens": 32,
    "max_user_tokens": 16,
}
EVAL = {
    "datasets": ["gsm8k"],
    "limit": 1,
    "temperatures": [0.0],
    "judges": ["rules"],
    "max_answer_tokens": 16,
    "max_user_tokens": 8,
}


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def cli(*args: str) -> None:
    code = main(list(args))
    assert code == 0, f"userturn {' '.join(args)} exited with {code}"


@pytest.fixture(scope="session")
def conversations_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("data") / "convs.jsonl", CONVERSATIONS)


@pytest.fixture(scope="session")
def probe_run(tmp_path_factory: pytest.TempPathFactory, smollm2_path: Path) -> Path:
    """A real probe run: 2 GSM8K items, T=1, k=4, llama.cpp, rules judge."""
    base = tmp_path_factory.mktemp("probe")
    cfg = base / "probe.yaml"
    cfg.write_text(yaml.safe_dump(PROBE), encoding="utf-8")
    cli("run", "--config", str(cfg), "--out", str(base / "run"))
    return base / "run"


@pytest.fixture(scope="session")
def sft_out(tmp_path_factory: pytest.TempPathFactory, conversations_file: Path) -> Path:
    """``train sft --loss-on user --eval``: 2 LoRA steps, then the tiny before/after."""
    base = tmp_path_factory.mktemp("sft")
    cfg = base / "eval.yaml"
    cfg.write_text(yaml.safe_dump(EVAL), encoding="utf-8")
    out = base / "sft"
    cli(
        "train",
        "sft",
        "--model",
        "smollm2-135m",
        "--data",
        str(conversations_file),
        "--loss-on",
        "user",
        "--out",
        str(out),
        "--max-steps",
        "2",
        "--batch-size",
        "2",
        "--max-length",
        "128",
        "--learning-rate",
        "1e-3",
        "--eval",
        "--eval-config",
        str(cfg),
    )
    return out


@pytest.fixture(scope="session")
def dpo_pairs(tmp_path_factory: pytest.TempPathFactory, probe_run: Path) -> Path:
    """Pairs on the real probe contexts: a written follow-up (chosen) against the
    model's own sampled user turn (rejected), so the trainer test doesn't depend on how
    many genuine turns a 135M model happens to sample."""
    records = [json.loads(x) for x in (probe_run / "records.jsonl").read_text().splitlines()]
    rows = [
        {
            "messages": r["messages"],
            "chosen": "Can you show how you got that number?",
            "rejected": r["user_turn"],
            "dataset": r["dataset"],
            "item_id": r["item_id"],
        }
        for r in records[:3]
    ]
    return write_jsonl(tmp_path_factory.mktemp("pairs") / "pairs.jsonl", rows)


@pytest.fixture(scope="session")
def dpo_out(tmp_path_factory: pytest.TempPathFactory, dpo_pairs: Path) -> Path:
    out = tmp_path_factory.mktemp("dpo") / "dpo"
    cli(
        "train",
        "dpo",
        "--model",
        "smollm2-135m",
        "--pairs",
        str(dpo_pairs),
        "--out",
        str(out),
        "--max-steps",
        "2",
        "--batch-size",
        "2",
        "--max-length",
        "256",
        "--learning-rate",
        "1e-3",
    )
    return out
