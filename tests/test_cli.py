"""CLI contracts: one-line errors with exit code 2, render, judge --in, list, dry-run.

Run: ``.venv/bin/python -m pytest tests/test_cli.py -q``
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from userturn.cli import main


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    return err


def test_unknown_model_dataset_judge_and_bad_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert "unknown model 'nope'" in one_line_error(capsys, ["run", "--model", "nope"])
    assert "unknown dataset" in one_line_error(capsys, ["run", "--dataset", "nope"])
    assert "unknown judge" in one_line_error(capsys, ["run", "--judge", "nope"])
    assert "field 'limit'" in one_line_error(capsys, ["run", "--limit", "x"])
    assert "temperatures" in one_line_error(capsys, ["run", "--temperatures", "0,hot"])
    assert "history_reasoning" in one_line_error(capsys, ["run", "--history-reasoning", "x"])
    assert "GGUF file not found" in one_line_error(
        capsys, ["run", "--model", "llamacpp:/no/such.gguf"]
    )


def test_malformed_jsonl_names_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "items.jsonl"
    good = {"id": "a", "messages": [{"role": "user", "content": "hi"}]}
    data.write_text(json.dumps(good) + "\n{not json\n")
    err = one_line_error(capsys, ["run", "--dataset", f"jsonl:{data}"])
    assert f"{data}:2:" in err and "invalid JSON" in err
    data.write_text(
        json.dumps(good)
        + "\n"
        + json.dumps({"id": "b", "messages": [{"role": "robot", "content": "x"}]})
        + "\n"
    )
    err = one_line_error(capsys, ["run", "--dataset", f"jsonl:{data}"])
    assert f"{data}:2: field 'messages[0].role'" in err


def test_config_unknown_key_names_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "exp.yaml"
    cfg.write_text("models: [smollm2-135m]\ntemperatures: [0]\ntemperture: 1\n")
    err = one_line_error(capsys, ["run", "--config", str(cfg)])
    assert f"{cfg}:3: field 'temperture': unknown key" in err


def test_render_template_json(
    shared_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    msgs = tmp_path / "m.json"
    msgs.write_text(
        json.dumps([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}])
    )
    tpl = shared_dir / "chat_templates" / "google-gemma-2-2b-it.jinja"
    assert (
        main(
            [
                "render",
                "--template",
                str(tpl),
                "--messages",
                str(msgs),
                "--bos-token",
                "<bos>",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["prompt"].endswith("Hello!<end_of_turn>\n<start_of_turn>user\n")
    assert out["user_header"] == "<start_of_turn>user\n" and "<end_of_turn>" in out["stop"]
    assert out["token_ids"] is None


def test_render_model_prints_exact_prompt_and_token_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    msgs = tmp_path / "m.json"
    msgs.write_text(
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": "Hi"},
                    {"role": "assistant", "content": "Hello!"},
                ]
            }
        )
    )
    assert main(["render", "--model", "smollm2-135m", "--messages", str(msgs)]) == 0
    text = capsys.readouterr().out
    assert text.endswith("Hello!<|im_end|>\n<|im_start|>user\n")
    assert main(["render", "--model", "smollm2-135m", "--messages", str(msgs), "--json"]) == 0
    ids = json.loads(capsys.readouterr().out)["token_ids"]
    assert ids[0] == 1 and ids[-3:] == [1, 4093, 198]  # <|im_start|> user \n


def test_judge_in_out_with_rules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "ex.jsonl"
    q = "A farmer plants 12 rows of 3 apple trees. How many apple trees does the farmer have?"
    ctx = [
        {"role": "user", "content": q},
        {"role": "assistant", "content": "12 rows x 3 trees = 36 apple trees."},
    ]
    rows = [
        {
            "id": "g",
            "messages": ctx,
            "user_turn": "Why did you multiply instead of add?",
            "model": "hidden",
        },
        {"id": "r", "messages": ctx, "user_turn": q},
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "labels.jsonl"
    assert main(["judge", "--in", str(src), "--judge", "rules", "--out", str(out)]) == 0
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [g["id"] for g in got] == ["g", "r"]
    assert set(got[0]) == {"id", "genuine_followup", "label", "rationale", "status"}
    assert got[0]["genuine_followup"] is True and got[1]["label"] == "previous_turn_restate"


def test_list_and_dry_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    listed = capsys.readouterr().out
    assert "smollm2-135m" in listed and "gsm8k" in listed and "truncate" in listed
    assert main(["run", "--limit", "5", "--samples", "3", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "5 answers + 20 user turns" in out and "judge offline: 0 calls" in out
