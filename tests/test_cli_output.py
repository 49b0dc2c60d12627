"""Results tables that survive a log: one line per row at 60, 80 and 120 columns, on a
terminal and in a pipe, for every probe, with perturbations; machine formats with
numbers, not "33.3% [6.1%, 79.2%]" strings.

The runs are real (the scripted ``fake`` backend, the rules judge, the real store and
cell summaries); the tables are rendered from their summary.json.

Run: ``.venv/bin/python -m pytest tests/test_cli_output.py -q``
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from userturn.analysis import run_table as results
from userturn.analysis.cell import CellSummary, GenerateCell, RolloutCell, cell_from_json
from userturn.analysis.tables import Table
from userturn.cli import main, output

GENERATE = [
    *("run", "--model", "fake:x", "--dataset", "gsm8k", "--dataset", "healthbench-prompts"),
    *("--limit", "3", "--samples", "2", "--judge", "rules", "--judge", "offline"),
    *("--perturb", "none", "--perturb", "truncate:0.5", "--perturb", "append-question"),
]
LIKELIHOOD = [
    *("likelihood", "--model", "fake:x", "--dataset", "healthbench", "--dataset", "mtbench"),
    *("--limit", "3", "--perturb", "none", "--perturb", "truncate:0.5"),
]
ROLLOUT = [  # a rollout takes one perturbation
    *("rollout", "--model", "fake:x", "--dataset", "healthbench-prompts", "--dataset", "gsm8k"),
    *("--limit", "2", "--turns", "3", "--judge", "rules", "--perturb", "truncate:0.5"),
]
PROBES = {"generate": GENERATE, "likelihood": LIKELIHOOD, "rollout": ROLLOUT}
KEY = results.KEY
DETAIL = results.DETAIL


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("probes")
    out = {}
    for name, argv in PROBES.items():
        out[name] = base / name
        assert main([*argv, "--out", str(out[name])]) == 0
    return out


def cells(run: Path) -> list[CellSummary]:
    data = json.loads((run / "summary.json").read_text())
    return [cell_from_json(c) for c in data["cells"]]


def render(table: Table, width: int, tty: bool) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=tty, color_system=None)
    output.render(table, console, detail=DETAIL, key=KEY, keep=results.HEADLINE)
    return re.sub(r"\x1b\[[0-9;]*m", "", buf.getvalue())


def grid_lines(text: str) -> list[str]:
    """The grid's body: the lines between the header rule and the moved columns."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if set(line.strip()) == {"─"}) + 1
    body = []
    for line in lines[start:]:
        if not line.strip() or (line.endswith(":") and not line.startswith(" ")):
            break
        body.append(line)
    return body


@pytest.mark.parametrize("tty", [False, True], ids=["pipe", "tty"])
@pytest.mark.parametrize("width", [60, 80, 120])
@pytest.mark.parametrize("probe", list(PROBES))
def test_every_row_is_one_line_and_no_value_folds(
    runs: dict[str, Path], probe: str, width: int, tty: bool
) -> None:
    table = results.results_table(cells(runs[probe]))
    assert len(table.shown) >= 4  # several perturbations, datasets or turns
    text = render(table, width, tty)
    assert max(len(line) for line in text.splitlines()) <= width, text
    assert len(grid_lines(text)) == len(table.shown), text  # one line per row
    rule = next(i for i, line in enumerate(text.splitlines()) if set(line.strip()) == {"─"})
    assert "model" in " ".join(text.splitlines()[1:rule])  # a grid, never `key: value` stacks
    for row in table.shown:
        for value in row:
            for item in output._items(value):  # a list may wrap between its items
                assert item in text, (item, text)


def test_perturbations_keep_the_grid_in_a_log(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--perturb` once switched piped output to `key: value` stacks; now the same grid,
    every row on one line, and the detail columns under it."""
    monkeypatch.setenv("COLUMNS", "80")
    assert main([*GENERATE, "--out", str(runs["generate"])]) == 0
    text = capsys.readouterr().out
    body = grid_lines(text)
    assert len(body) == 2 * 2 * 3 * 2  # datasets x T x perturbations x judges
    row = r"(\d+\s+)?fake:x\s+(gsm8k|healthbench-prompts)\s+[01]\s+\S+"
    assert all(re.match(row, x) for x in body), text
    assert "more columns:" in text and "perturbation append-question:Does that make sense?" in text


@pytest.mark.parametrize("probe", list(PROBES))
def test_csv_and_json_carry_numbers(
    runs: dict[str, Path], probe: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*PROBES[probe], "--out", str(runs[probe]), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    summary = cells(runs[probe])
    assert len(rows) == len(results.results_table(summary).rows)
    numeric = {
        "generate": ("rate", "ci_low", "ci_high", "corrected", "accuracy"),
        "likelihood": ("preferred", "preferred_ci_low", "preferred_ci_high", "margin"),
        "rollout": ("rate", "ci_low", "ci_high", "survival", "survival_ci_high"),
    }[probe]
    for row in rows:
        for key in numeric:
            if row[key] != "":
                float(row[key])  # a number, not "33.3% [6.1%, 79.2%]"
        assert "%" not in "".join(row[k] for k in numeric)
    if probe == "generate":
        by_key = {(c.dataset, c.temperature, c.perturbation, c.judge): c for c in summary}
        for row in rows:
            cell = by_key[(row["dataset"], float(row["T"]), row["perturbation"], row["judge"])]
            assert float(row["rate"]) == pytest.approx(cell.rate)
            assert float(row["ci_low"]) == pytest.approx(cell.ci_low)


def test_table_shape_is_the_same_for_any_grid() -> None:
    """The machine columns do not depend on whether the grid has perturbations."""
    plain = GenerateCell(
        "m", "d", 0.0, "none", "rules", "c", n=3, rate=0.5, ci_low=0.1, ci_high=0.9
    )
    perturbed = GenerateCell("m", "d", 0.0, "truncate:0.5", "rules", "c", n=3, rate=0.5)
    one, two = results.results_table([plain]), results.results_table([plain, perturbed])
    assert one.raw_columns == two.raw_columns
    assert "perturbation" not in one.columns and "perturbation" in two.columns


def test_the_rollout_table_prints_survival_beside_its_null_floor() -> None:
    """Survival is not corrected, so its shown value carries what the judge reports when
    no turn is genuine; the csv and json keep the floor as a number of its own."""
    cell = RolloutCell(
        "m", "d", 1.0, "none", "offline", "c", turn=2, n=8, rate=0.5,
        ci_low=0.2, ci_high=0.8, survival=0.25, survival_ci_low=0.05, survival_ci_high=0.6,
        survival_null=0.0179,
    )  # fmt: skip
    t = results.results_table([cell])
    shown = dict(zip(t.columns, t.shown[0], strict=True))
    assert shown["survival [95% CI]"] == "25.0% [5.0%, 60.0%] null 1.8%"
    assert dict(zip(t.raw_columns, t.rows[0], strict=True))["survival_null"] == 0.0179


def test_a_sampled_run_prints_gf_at_k_beside_its_null_floor(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Cells with k > 1 samples show GF@k at their largest k beside the floor a judge with
    the card's error rates reports when no turn is genuine, and corrected; the csv keeps
    each as a number, the same as summary.json; greedy cells (one sample) leave it empty."""
    summary = [c for c in cells(runs["generate"]) if isinstance(c, GenerateCell)]
    sampled = [c for c in summary if c.samples > 1]
    assert sampled and any(c.samples == 1 for c in summary)
    table = results.results_table(summary)
    assert "GF@k" in table.columns and "GF@k corrected [95% CI]" in table.columns
    for cell, row in zip(summary, table.shown, strict=True):
        shown = dict(zip(table.columns, row, strict=True))
        if cell.samples == 1:
            assert shown["GF@k"] == shown["GF@k corrected [95% CI]"] == "-"
            continue
        assert cell.gf_at_k and cell.gf_at_k_null and cell.gf_at_k_corrected_ci
        k = max(cell.gf_at_k)
        assert k == 2  # --samples 2
        judged, null = cell.gf_at_k[k], cell.gf_at_k_null[k]
        assert shown["GF@k"] == f"GF@2 {judged:.1%} null {null:.1%}"
        low, high = cell.gf_at_k_corrected_ci[k]
        assert shown["GF@k corrected [95% CI]"].startswith(
            f"{(cell.gf_at_k_corrected or {})[k]:.1%} [{low:.1%}, {high:.1%}]"
        )

    assert main([*GENERATE, "--out", str(runs["generate"]), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    by_key = {(c.dataset, c.temperature, c.perturbation, c.judge): c for c in summary}
    checked = 0
    for row in rows:
        cell = by_key[(row["dataset"], float(row["T"]), row["perturbation"], row["judge"])]
        if cell.samples == 1:
            assert row["gf_k"] == row["gf_at_k"] == row["gf_at_k_null"] == ""
            continue
        assert cell.gf_at_k and cell.gf_at_k_null and cell.gf_at_k_corrected
        assert int(row["gf_k"]) == 2
        assert float(row["gf_at_k"]) == pytest.approx(cell.gf_at_k[2])
        assert float(row["gf_at_k_null"]) == pytest.approx(cell.gf_at_k_null[2])
        assert float(row["gf_at_k_corrected"]) == pytest.approx(cell.gf_at_k_corrected[2])
        low, high = (float(row[f"gf_at_k_corrected_ci_{s}"]) for s in ("low", "high"))
        assert low <= float(row["gf_at_k_corrected"]) <= high
        # the floor is 1 - sp^2 with the cell's specificity (the rate's correction takes
        # its sp as the mean of twice as many draws, hence the tolerance)
        spec = cell.correction_specificity
        assert spec is not None
        assert float(row["gf_at_k_null"]) == pytest.approx(1 - spec**2, abs=0.01)
        checked += 1
    assert checked == len(sampled)
