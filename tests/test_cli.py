"""CLI contracts: one-line errors with exit code 2, render, judge --in, list, dry-run,
output that fits 80 columns, --format, clean help, deduplicated warnings.

Run: ``.venv/bin/python -m pytest tests/test_cli.py -q``
"""

from __future__ import annotations

import csv
import io
import json
import logging
import re
import sys
import tomllib
from pathlib import Path

import pytest
from rich.console import Console

from shared_files import REPO
from userturn.analysis.tables import Table
from userturn.cli import main, output
from userturn.judges.card import card_digest, load_card
from userturn.judges.rules import RulesJudge
from userturn.spec import Spec

FAKE_RUN = ["run", "--model", "fake:x", "--limit", "3", "--judge", "rules"]


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    return err


def test_unknown_model_dataset_judge_and_bad_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert "unknown model 'nope'" in one_line_error(capsys, ["run", "--model", "nope"])
    assert "unknown dataset" in one_line_error(capsys, ["run", "--dataset", "nope"])
    assert "unknown judge" in one_line_error(capsys, ["run", "--judge", "nope"])
    assert "field '--limit'" in one_line_error(capsys, ["run", "--limit", "x"])
    assert "--temperatures" in one_line_error(capsys, ["run", "--temperatures", "0,hot"])
    assert "--history-reasoning" in one_line_error(capsys, ["run", "--history-reasoning", "x"])
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
    got = capsys.readouterr()
    assert got.out.endswith("Hello!<|im_end|>\n<|im_start|>user\n")  # stdout: the prompt only
    details = got.err.splitlines()  # header, stops and ids beside it, on stderr
    assert details[0] == "user header: '<|im_start|>user\\n'" and "<|im_end|>" in details[1]
    assert details[2].startswith("token ids (") and details[2].endswith("198]")
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


def test_dry_run_counts_what_is_left(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main([*FAKE_RUN, "--out", str(out)]) == 0
    capsys.readouterr()
    assert main([*FAKE_RUN[:4], "5", *FAKE_RUN[5:], "--out", str(out), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "2 answers + 4 user turns left to generate (3 answers and 6 user turns stored)" in text
    assert main(["run", "--dry-run", "--model", "fake:x", "--model", "nope"]) == 2


def test_dry_run_of_the_other_probes(capsys: pytest.CaptureFixture[str]) -> None:
    """Likelihood contexts cost no judge call; rollouts count conversations x turns."""
    argv = ["--dataset", "healthbench", "--limit", "4", "--dry-run"]
    assert main(["likelihood", "--model", "fake:x", *argv]) == 0
    text = capsys.readouterr().out
    assert "contexts to score: 4 (0 stored); no judge calls" in text
    assert "user turns" not in text
    roll = ["rollout", "--model", "fake:x", "--dataset", "gsm8k", "--limit", "2"]
    best = ["--best-of", "2", "--judge", "offline", "--judge", "rules"]  # one picks, one scores
    assert main([*roll, "--turns", "3", *best, "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "2 conversations" in text and "at most 6 user turns" in text
    assert "12 candidates with best-of 2" in text


def test_requires_python_matches_the_tooling() -> None:
    """gsm8k reads TOML with tomllib (3.11+): pyproject, ruff and mypy say the same."""
    meta = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert meta["project"]["requires-python"] == ">=3.11"
    assert meta["tool"]["ruff"]["target-version"] == "py311"
    assert meta["tool"]["mypy"]["python_version"] == "3.11"
    assert sys.version_info >= (3, 11)


def test_bare_command_prints_help_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    got = capsys.readouterr()
    assert got.out.startswith("Usage: userturn [OPTIONS] COMMAND") and got.err == ""


@pytest.mark.parametrize("argv", [["run"], ["compare"], ["agree"], ["judge"], ["data", "list"]])
def test_help_shows_plain_metavars(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--help"]) == 0
    text = capsys.readouterr().out
    assert "<" not in text and "list[" not in text, text
    assert not re.search(r"\{[a-z_]+\}", text), text  # an argument as {run_a}
    if argv == ["compare"]:
        assert "Usage: userturn compare [OPTIONS] RUN_A RUN_B" in text


WIDE = Table(
    "results",
    "",
    ["model", "dataset", "T", "n", "genuine rate [95% CI]", "unparseable", "top failure labels"],
    [],
    [
        [
            "smollm2-135m",
            "healthbench-prompts",
            "1",
            "100",
            "40.0% [31.0%, 49.0%]",
            "0",
            "previous_turn_restate 26%, new_task_prompt 18%",
        ]
    ],
)


@pytest.mark.parametrize("width", [40, 60, 80, 120, 200])
def test_tables_never_split_a_word(width: int) -> None:
    buf = io.StringIO()
    output.render(WIDE, Console(file=buf, width=width), detail=("top failure labels",))
    text = buf.getvalue()
    assert max(len(line) for line in text.splitlines()) <= width
    words = {w.rstrip(",") for row in WIDE.shown for cell in row for w in cell.split()}
    words |= {w for col in WIDE.columns for w in col.split()}  # headers stay whole too
    seen = {w.rstrip(":;,") for w in text.split()}  # entries print "name:", "a; b"
    assert words <= seen, words - seen


def test_a_run_table_fills_80_columns_without_splitting_a_header() -> None:
    """The run table's eight columns at 80: the last column's padding is counted, so
    Rich never has to fold a header (it once printed ``unparseabl`` / ``e``)."""
    cols = ["model", "dataset", "T", "perturbation", "n", "accuracy"]
    cols += ["genuine rate [95% CI]", "unparseable"]
    row = ["smollm2-135m", "gsm8k", "0.7", "truncate:0.5", "2", "0.0% (1)"]
    table = Table("results", "", cols, [], [[*row, "50.0% [0.2%, 99.8%]", "0"]])
    buf = io.StringIO()
    output.render(table, Console(file=buf, width=80))
    text = buf.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    row_line = next(line for line in text.splitlines() if line.startswith("smollm2-135m "))
    assert "truncate:0.5" in row_line and "50.0% [0.2%, 99.8%]" in row_line  # one line
    assert "unparseable:\n  smollm2-135m: 0" in text  # the column that did not fit


def test_run_table_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main([*FAKE_RUN, "--out", str(out), "--format", "json"]) == 0
    got = capsys.readouterr()
    cells = json.loads(got.out)["cells"]  # stdout is JSON alone; notes went to stderr
    assert {c["temperature"] for c in cells} == {0.0, 1.0} and "this invocation" in got.err
    assert main([*FAKE_RUN, "--out", str(out), "--format", "csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0][:3] == ["model", "dataset", "T"] and len(rows) == 3
    assert main([*FAKE_RUN, "--out", str(out), "--format", "md"]) == 0
    assert "| model | dataset | T |" in capsys.readouterr().out
    assert main(["data", "list", "--format", "json"]) == 0
    listed = {d["dataset"] for d in json.loads(capsys.readouterr().out)}
    assert {"gsm8k", "jsonl", "sharegpt"} <= listed
    assert main(["compare", str(out), str(out), "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("dataset,T,perturbation,judge,rate A")
    assert main(["run", "--format", "yaml"]) == 2


def test_agree_prints_one_style(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        ("a", True, "plausible_followup"),
        ("b", False, "new_task_prompt"),
        ("c", True, "plausible_followup"),
    ]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(
        "".join(json.dumps({"id": i, "genuine_followup": g, "label": x}) + "\n" for i, g, x in rows)
    )
    flipped = [(i, not g, "other") if i == "c" else (i, g, x) for i, g, x in rows]
    b.write_text(
        "".join(
            json.dumps({"id": i, "genuine_followup": g, "label": x}) + "\n" for i, g, x in flipped
        )
    )
    assert main(["agree", str(a), str(b), "--bootstrap", "50"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    head = next(x for x in lines if x.startswith("confusion (rows A, columns B)"))
    row = next(x for x in lines if x.startswith("A genuine "))
    assert head.index("B genuine") == row.index("1")  # the count sits under its header
    assert "matched ok rows (n)" in text and "agreement on genuine   " in text
    assert main(["agree", str(a), str(b), "--format", "json", "--bootstrap", "50"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["n"] == 3 and res["confusion"]["matrix"] == [[1, 1], [0, 1]]


def test_repeated_warnings_are_shown_once(capsys: pytest.CaptureFixture[str]) -> None:
    """A dead server's warning, once per request, says nothing new after the first."""
    from userturn.cli import _logging

    _logging()
    log = logging.getLogger("userturn.test")
    for _ in range(4):
        log.warning("server at http://127.0.0.1:9 refused the connection")
    log.warning("another warning")
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "WARNING userturn.test: server at http://127.0.0.1:9 refused the connection",
        "WARNING userturn.test: another warning",
    ]


def test_sample_and_items_choose_rows_not_configs(tmp_path: Path) -> None:
    """--sample N draws the same seeded subset every time; --items picks ids. Both name
    the default run directory (run hash) but not the rows' config fingerprint."""
    data = tmp_path / "items.jsonl"
    rows = [
        {"id": f"q{i}", "messages": [{"role": "user", "content": f"{i}+1?"}]} for i in range(10)
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = ["run", "--model", "fake:x", "--dataset", f"jsonl:{data}", "--temperatures", "0"]
    base += ["--judge", "rules"]

    def chosen(name: str, *flags: str) -> tuple[set[str], set[str]]:
        assert main([*base, *flags, "--out", str(tmp_path / name)]) == 0
        recs = [json.loads(x) for x in (tmp_path / name / "records.jsonl").read_text().splitlines()]
        return {r["item_id"] for r in recs}, {r["config"] for r in recs}

    first, cfg1 = chosen("a", "--sample", "3", "--seed", "5")
    again, _ = chosen("b", "--sample", "3", "--seed", "5")
    picked, cfg2 = chosen("c", "--items", "q2,q7", "--seed", "5")
    assert len(first) == 3 and first == again and picked == {"q2", "q7"}
    assert cfg1 == cfg2  # item selection is not a row's config
    from userturn.cli.run_cmd import build_run_config
    from userturn.run.driver import default_out

    outs = {
        default_out(build_run_config(None, {"sample": n, "datasets": [f"jsonl:{data}"]}))
        for n in (3, 4)
    }
    assert len(outs) == 2


def test_run_table_prints_the_corrected_rate_beside_the_raw_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A judge with a card (the shipped rules card) gets a corrected column and a note
    naming the card; the values are the ones summary.json holds."""
    monkeypatch.setenv("COLUMNS", "120")
    out = tmp_path / "run"
    assert main([*FAKE_RUN, "--out", str(out)]) == 0
    got = capsys.readouterr()
    cells = json.loads((out / "summary.json").read_text())["cells"]
    assert all(c["judge_card"] for c in cells)
    shipped = load_card("rules", RulesJudge(Spec(kind="rules", target="", raw="rules")).version)
    assert shipped is not None and {c["judge_card_sha"] for c in cells} == {card_digest(shipped)}
    assert "corrected [95% CI]" in got.out and "judge card " + cells[0]["judge_card"] in got.out
    for c in cells:
        lo, hi = c["ci_corrected_low"], c["ci_corrected_high"]
        assert f"{c['rate_corrected']:.1%} [{lo:.1%}, {hi:.1%}]" in got.out


def test_a_table_moves_its_detail_column_before_wrapping_every_value() -> None:
    """At 100 columns the run table fits with whole values once its labels move below;
    that beats keeping the labels and wrapping every rate over three lines."""
    cols = ["model", "dataset", "T", "n", "accuracy", "genuine rate [95% CI]"]
    cols += ["corrected [95% CI]", "unparseable", "top failure labels"]
    row = ["smollm2-135m", "gsm8k", "0", "50", "4.0% (50)", "26.0% [15.9%, 39.6%]"]
    row += ["17.1% [0.0%, 40.1%]", "0", "new_task_prompt 32%, previous_turn_restate 32%"]
    buf = io.StringIO()
    output.render(Table("results", "", cols, [], [row]), Console(file=buf, width=100),
                  detail=("top failure labels",))  # fmt: skip
    text = buf.getvalue()
    assert "26.0% [15.9%, 39.6%]" in text and "17.1% [0.0%, 40.1%]" in text
    assert "top failure labels:\n  smollm2-135m: new_task_prompt 32%" in text


def test_run_table_names_the_strata_of_its_corrected_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The corrected rate uses the card's GSM8K stratum and names it; the fake model is in
    no stratum, so the value is marked as extrapolated and the note says what * means."""
    monkeypatch.setenv("COLUMNS", "200")
    out = tmp_path / "run"
    assert main([*FAKE_RUN, "--out", str(out)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    cells = json.loads((out / "summary.json").read_text())["cells"]
    for c in cells:
        assert c["correction_strata"]["dataset"] == "gsm8k"
        assert c["correction_strata"]["model"] is None  # the card has no fake model
        assert "extrapolated" in c["correction_note"]
        lo, hi = c["ci_corrected_low"], c["ci_corrected_high"]
        assert f"{c['rate_corrected']:.1%} [{lo:.1%}, {hi:.1%}]*" in text
    assert "dataset=gsm8k, model=? (not in card): se " in text
    assert "* the card has no reference turns from this model or dataset" in text
