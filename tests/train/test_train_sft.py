"""``userturn train sft --loss-on user --eval`` on the embedded model, tiny budget.

Run: ``.venv/bin/python -m pytest tests/train/test_train_sft.py -q`` (about a minute on 2
cores: 2 LoRA steps on 4 short conversations, then a 1-item before/after).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from train_helpers import assert_adapter_changes_outputs, assert_finite_losses, train_json

from userturn.cli import main


def test_sft_loss_is_finite_and_masks_only_follow_ups(sft_out: Path) -> None:
    meta = train_json(sft_out)
    assert_finite_losses(meta, steps=2)
    assert meta["method"] == "sft" and meta["lora"] is True
    assert meta["settings"]["loss_on"] == "user"
    data = meta["data"]
    assert data["used"] == 4 and 0 < data["trained_tokens"] < data["tokens"]
    assert meta["trained_spec"] == f"hf:smollm2-135m?adapter={sft_out.resolve()}"


def test_sft_adapter_loads_and_changes_outputs(sft_out: Path) -> None:
    assert_adapter_changes_outputs(
        sft_out,
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
        "<|im_start|>user\n",
    )


def test_sft_eval_writes_the_before_after_table(sft_out: Path) -> None:
    ev = sft_out / "eval"
    comp = json.loads((ev / "comparison.json").read_text(encoding="utf-8"))
    (row,) = comp["rows"]
    assert (row["dataset"], row["temperature"], row["judge"]) == ("gsm8k", 0.0, "rules")
    assert row["model_a"] == "hf:smollm2-135m"
    assert row["model_b"] == f"hf:smollm2-135m+{sft_out.name}"
    assert row["n_a"] + row["unparseable_a"] == 1 == row["n_b"] + row["unparseable_b"]
    assert comp["train_eval_overlap"] == []
    md = (ev / "comparison.md").read_text(encoding="utf-8")
    assert "rate before [95% CI]" in md and "| gsm8k | 0 |" in md
    assert "corrected before [95% CI]" in md and "Δ corrected pts [95% CI]" in md
    sides = {}
    for side, suffix in (("before", "a"), ("after", "b")):
        cells = json.loads((ev / side / "summary.json").read_text())["cells"]
        assert len(cells) == 1 and cells[0]["accuracy"] is not None
        sides[side] = cell = cells[0]
        # each side's corrected rate and CI are its own run table's, through the rules card
        assert cell["judge_card"] == row["judge_card"] is not None
        assert row[f"rate_corrected_{suffix}"] == cell["rate_corrected"] is not None
        assert row[f"rate_corrected_ci_low_{suffix}"] == cell["ci_corrected_low"]
        assert row[f"rate_corrected_ci_high_{suffix}"] == cell["ci_corrected_high"]
    before, after = sides["before"], sides["after"]
    # hf:smollm2-135m runs the card's smollm2-135m weights, so it gets that stratum; the
    # adapter is other weights the card never saw. The sides then rest on different error
    # rates, so the corrected change is the difference of the corrected rates, with no CI
    # and the reason named (the paired case is tests/train/test_before_after.py)
    assert before["correction_strata"]["model"] == "smollm2-135m"
    assert after["correction_strata"]["model"] is None
    assert row["rate_corrected_method"] == "no CI: sides corrected with different card strata"
    assert row["rate_corrected_diff"] == pytest.approx(
        after["rate_corrected"] - before["rate_corrected"], abs=1e-9
    )
    assert row["rate_corrected_diff_ci_low"] is None is row["rate_corrected_diff_ci_high"]
    # the same table, through the summary.json contract
    assert main(["compare", str(ev / "before"), str(ev / "after"), "--json"]) == 0


@pytest.mark.parametrize(
    "args, field",
    [
        (["--loss-on", "everything"], "loss-on"),
        (["--loss-on", "user", "--max-steps", "0"], "max-steps"),
        (["--loss-on", "user", "--model", "llamacpp:x.gguf"], "model"),
        (["--loss-on", "user", "--model", "hf:x?adapter=y"], "model"),
        (["--loss-on", "user", "--data", "/nonexistent/convs.jsonl"], "data"),
    ],
)
def test_sft_bad_flags_fail_before_loading(
    args: list[str], field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = [
        "train",
        "sft",
        "--model",
        "smollm2-135m",
        "--data",
        "sharegpt",
        "--out",
        str(tmp_path / "o"),
    ]
    code = main(base + args)
    err = capsys.readouterr().err
    assert code == 2 and f"field '--{field}'" in err, err
    assert not (tmp_path / "o").exists()


def test_train_eval_reevaluates_a_trained_folder_without_new_calls(sft_out: Path) -> None:
    """``train eval --trained DIR`` repeats the --eval step; the runs resume from their
    stores, so the table is the same and no model is called."""
    ev = sft_out / "eval"
    first = json.loads((ev / "comparison.json").read_text(encoding="utf-8"))["rows"]
    cfg = sft_out.parent / "eval.yaml"
    code = main(
        [
            "train",
            "eval",
            "--trained",
            str(sft_out),
            "--eval-config",
            str(cfg),
            "--eval-options",
            "batch=4",
        ]
    )
    assert code == 0
    again = json.loads((ev / "comparison.json").read_text(encoding="utf-8"))["rows"]
    assert again == first
    for side in ("before", "after"):
        stats = json.loads((ev / side / "run_stats.json").read_text(encoding="utf-8"))
        assert stats["model_calls"] == 0 and stats["generated"] == 0, stats
