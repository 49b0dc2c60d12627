"""``export conversations`` round-trips into ``train sft`` and ``datasets.load_dataset``.

Run: ``.venv/bin/python -m pytest tests/train/test_export_conversations.py -q`` (about a
minute: a fake-backend rollout, then 2 LoRA steps on the export with the embedded model).
"""

from __future__ import annotations

import json
from pathlib import Path

from train_helpers import assert_finite_losses, train_json

from userturn.cli import main
from userturn.config import build_config
from userturn.run.driver import run


def test_rollout_export_trains_sft(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"user": ["Why did you add those two numbers first?"]}))
    cfg = build_config(
        {
            "models": [f"fake:exp?script={script}"],
            "datasets": ["gsm8k"],
            "limit": 4,
            "temperatures": [1.0],
            "turns": 2,
            "judges": ["offline"],
            "probe": "rollout",
        }
    )
    run(cfg, tmp_path / "run")
    out = tmp_path / "convs.jsonl"
    assert main(["export", "conversations", "--run", str(tmp_path / "run"), "--out", str(out)]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 4
    for line in lines:
        roles = [m["role"] for m in line["messages"]]
        assert roles == ["user", "assistant", "user", "assistant", "user"]  # 2 user turns
    import datasets

    ds = datasets.load_dataset("json", data_files=str(out), split="train")
    assert ds.num_rows == 4 and ds[0]["messages"][-1]["role"] == "user"
    sft = tmp_path / "sft"
    code = main(
        [
            "train",
            "sft",
            "--model",
            "smollm2-135m",
            "--data",
            str(out),
            "--loss-on",
            "user",
            "--out",
            str(sft),
            "--max-steps",
            "2",
            "--batch-size",
            "2",
            "--max-length",
            "192",
        ]
    )
    assert code == 0
    meta = train_json(sft)
    assert_finite_losses(meta, steps=2)
    assert meta["data"]["used"] == 4 and meta["data"]["trained_tokens"] > 0
