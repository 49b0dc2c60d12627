"""manifest.yaml reproduces a run: ``userturn run --config DIR/manifest.yaml --out NEW``.

Run: ``.venv/bin/python -m pytest tests/test_manifest.py -q`` (two tiny real runs of the
embedded SmolLM2 through the CLI, well under a minute on an idle machine).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from userturn import assets
from userturn.cli import main

SAME = (
    "id", "item_id", "model", "temperature", "sample", "seed", "messages", "answer",
    "answer_finish", "user_turn", "user_finish", "prompt_sha", "template_sha", "judgments",
)  # fmt: skip


def records(out: Path) -> list[dict[str, Any]]:
    rows = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    return sorted(({k: r[k] for k in SAME} for r in rows), key=lambda r: str(r["id"]))


def test_manifest_reproduces_the_run(
    tmp_path: Path, smollm2_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    experiment = tmp_path / "exp.yaml"
    experiment.write_text(
        yaml.safe_dump(
            {
                "models": ["smollm2-135m?n_threads=1"],
                "datasets": ["gsm8k"],
                "limit": 2,
                "temperatures": [0, 1.0],
                "samples": 2,
                "seed": 5,
                "judges": ["rules"],
                "max_answer_tokens": 16,
                "max_user_tokens": 8,
                "frozen_date": "2024-07-26",  # a day that isn't today
            }
        )
    )
    first, again = tmp_path / "first", tmp_path / "again"
    assert main(["run", "--config", str(experiment), "--out", str(first)]) == 0
    man = yaml.safe_load((first / "manifest.yaml").read_text())
    assert man["frozen_date"] == man["config"]["frozen_date"] == "2024-07-26"
    assert man["versions"]["userturn"] and man["versions"]["python"]
    assert {"userturn_git_sha", "userturn_git_dirty"} <= set(man)
    assert {"cpus", "memory_gb", "gpus", "platform"} <= set(man["hardware"])
    (model,) = man["models"]
    assert model["revision"] == assets.SMOLLM2.sha256  # the model file's SHA-256
    assert len(model["template_sha"]) == 64
    assert model["capabilities"]["seeds"] is True

    assert main(["run", "--config", str(first / "manifest.yaml"), "--out", str(again)]) == 0
    capsys.readouterr()
    want = records(first)
    assert len(want) == 2 * (1 + 2)
    assert records(again) == want  # T=0 and T=1 with derived seeds: the same records
    man2 = yaml.safe_load((again / "manifest.yaml").read_text())
    assert man2["frozen_date"] == "2024-07-26"
    assert man2["config"] == man["config"]
    stats = json.loads((again / "run_stats.json").read_text())
    assert stats["generated"] == len(want)  # regenerated from scratch, not copied
