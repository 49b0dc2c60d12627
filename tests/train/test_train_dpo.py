"""``userturn train dpo`` on the embedded model with pairs on real probe contexts.

Run: ``.venv/bin/python -m pytest tests/train/test_train_dpo.py -q`` (about a minute: the
session's probe run, then 2 LoRA DPO steps on 3 pairs).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from train_helpers import assert_adapter_changes_outputs, assert_finite_losses, train_json

from userturn.chat import ChatTemplate, derive_markers, user_turn_prompt
from userturn.errors import UserError
from userturn.train.dpo import DPOSettings, dpo_rows, load_pairs
from userturn.train.pairs import extract_pairs, run_records


def test_dpo_loss_is_finite_and_adapter_changes_outputs(
    dpo_out: Path,
    dpo_pairs: Path,
) -> None:
    meta = train_json(dpo_out)
    assert_finite_losses(meta, steps=2)
    assert meta["method"] == "dpo" and meta["data"]["pairs"] == 3
    assert meta["data"]["items"] and all(i.startswith("gsm8k/") for i in meta["data"]["items"])
    assert (dpo_out / "pairs.jsonl").read_text().count("\n") == 3
    pair = json.loads(dpo_pairs.read_text().splitlines()[0])
    from userturn.hfmodel import load_tokenizer
    from userturn.train.data import template_from_tokenizer

    tpl = template_from_tokenizer(load_tokenizer("smollm2-135m"), "smollm2-135m")
    assert_adapter_changes_outputs(dpo_out, user_turn_prompt(tpl, pair["messages"]).prompt)


def test_dpo_rows_score_the_user_turn_after_the_user_header(shared_dir: Path) -> None:
    for name in (
        "Qwen-Qwen2.5-7B-Instruct.jinja",
        "meta-llama-Llama-3.1-8B-Instruct.jinja",
        "GLM-4.6.jinja",
    ):
        path = shared_dir / "chat_templates" / name
        tpl = ChatTemplate(
            path.read_text(encoding="utf-8"), name, bos_token="<s>", eos_token="</s>"
        )
        markers = derive_markers(tpl)
        pair = {
            "messages": [
                {"role": "user", "content": "2+2?"},
                {"role": "assistant", "content": "4."},
            ],
            "chosen": "Why 4?",
            "rejected": "2+2?",
        }
        (row,) = dpo_rows(tpl, [pair])
        assert row["prompt"].endswith(markers.user_header), name
        assert "4." in row["prompt"]
        end = markers.user_end.strip() or markers.user_stops(tpl)[0]
        assert row["chosen"] == "Why 4?" + end and row["rejected"] == "2+2?" + end


def test_from_run_gives_the_runs_pairs_or_says_why_not(
    probe_run: Path,
    tmp_path: Path,
) -> None:
    expected, _ = extract_pairs(run_records(probe_run), "rules")
    settings = DPOSettings(model="smollm2-135m", out=tmp_path, from_run=probe_run)
    if expected:
        pairs, info = load_pairs(settings)
        assert [p["id"] for p in pairs] == [p["id"] for p in expected]
        assert info["judge"] == "rules"
    else:
        with pytest.raises(UserError, match="no preference pairs"):
            load_pairs(settings)


def test_needs_exactly_one_source(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="exactly one"):
        DPOSettings(model="smollm2-135m", out=tmp_path).check()
