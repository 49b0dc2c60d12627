"""Tables in the paper's shapes as Markdown, CSV and LaTeX, from a synthetic store.

Run: ``.venv/bin/python -m pytest tests/test_tables.py -q`` (a few seconds, no model).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from synthetic_runs import Spec, build_run
from userturn.analysis import tables as T
from userturn.analysis.views import Analysis, analyze
from userturn.rundir.store import Store
from userturn.types import LABELS


@pytest.fixture(scope="module")
def analysis(tmp_path_factory: pytest.TempPathFactory) -> Analysis:
    run = build_run(tmp_path_factory.mktemp("run"), write=False)
    store = Store(run / "store.sqlite")
    try:
        return analyze(store)
    finally:
        store.close()


def test_accuracy_followup_has_one_row_per_model_dataset(analysis: Analysis) -> None:
    t = T.accuracy_followup_table(analysis, "rules")
    spec = Spec()
    assert len(t.rows) == len(spec.models) * len(spec.datasets)
    col = t.columns.index("T")
    assert {r[col] for r in t.rows} == {0.0}  # the lowest temperature
    acc = t.columns.index("accuracy")
    held_out = [r for r in t.rows if r[t.columns.index("dataset")] == "chat"]
    assert all(r[acc] is None for r in held_out)


def test_temperature_sweep_columns_follow_the_grid(analysis: Analysis) -> None:
    t = T.temperature_table(analysis, "rules")
    assert t.columns == ["model", "dataset", "T=0", "T=0.7", "T=1", "unparseable"]
    assert all("[" in v and "n=" in v for row in t.shown for v in row[2:5])
    # the synthetic run has one unparseable verdict per (model, dataset, T>0) cell
    assert {row[-1] for row in t.rows} == {2}


def test_perturbation_and_failure_tables(analysis: Analysis) -> None:
    p = T.perturbation_table(analysis, "rules")
    assert len(p.rows) == 3 * 2 * 3
    assert all(r[3] == "truncate:0.5" for r in p.rows)
    f = T.failure_table(analysis, "rules", "family")
    assert f.columns[1 : 1 + len(LABELS)] == list(LABELS)
    for row in f.rows:
        assert sum(row[1 : 1 + len(LABELS)]) == pytest.approx(1.0)


def test_markdown_csv_latex_render_and_escape(tmp_path: Path) -> None:
    t = T.Table(
        "x", "50% & more_things", ["a|b", "c"], [["1_000", None]], [["5 | 6", "7%"]], note="n"
    )
    md = t.to_markdown()
    assert "| a\\|b | c |" in md and "| 5 \\| 6 | 7% |" in md
    rows = list(csv.reader(io.StringIO(t.to_csv())))
    assert rows == [["a|b", "c"], ["1_000", ""]]
    tex = t.to_latex()
    assert r"\caption{50\% \& more\_things}" in tex and r"7\%" in tex
    assert tex.count(r"\\") == 2  # header + one row
    paths = t.write(tmp_path)
    assert sorted(p.suffix for p in paths) == [".csv", ".md", ".tex"]


def test_all_tables_for_an_unknown_judge_are_empty_not_wrong(analysis: Analysis) -> None:
    for t in T.all_tables(analysis, "no-such-judge"):
        assert t.rows == [] and t.to_markdown() and t.to_latex()


def test_small_item_counts_carry_a_caution(analysis: Analysis) -> None:
    # the synthetic grid has 6 items per cell: too few for a trustworthy bootstrap
    assert "Caution" in T.temperature_table(analysis, "rules").note
    assert "Caution" in T.perturbation_table(analysis, "rules").note


def test_sampling_table_prints_corrected_values_beside_null_floors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """GF@k and the item spread are never shown alone: beside each judged value, its
    value corrected through the judge's card (with a CI) and its null floor. A real run
    on the fake model with the rules judge, whose card ships."""
    from userturn.cli import main

    out = tmp_path / "run"
    argv = ["run", "--model", "fake:x", "--limit", "6", "--judge", "rules", "--samples", "4"]
    assert main([*argv, "--temperatures", "1.0", "--out", str(out)]) == 0
    capsys.readouterr()
    with Store(out / "store.sqlite") as store:
        a = analyze(store)
    t = T.sampling_table(a, "rules")
    cells = [c for c in a.cells if c.samples > 1 and c.probe == "generate"]
    assert len(t.rows) == len(cells) == 1
    for name in ("GF@4 corrected", "GF@4 null", "never (null)", "always (null)"):
        assert name in t.columns
    shown = dict(zip(t.columns, t.shown[0], strict=True))
    for name in ("GF@4 corrected", "never corrected", "sometimes corrected", "always corrected"):
        assert shown[name].count("%") == 3 and "[" in shown[name], (name, shown[name])
    assert shown["GF@4 null"].endswith("%") and shown["never (null)"].endswith("%")
    c = cells[0]
    assert t.rows[0][t.columns.index("never corrected")] == c.items_never_corrected
    for share in ("never", "sometimes", "always"):
        value = getattr(c, f"items_{share}_corrected")
        lo, hi = (getattr(c, f"items_{share}_corrected_ci_{end}") for end in ("low", "high"))
        assert value is not None and lo <= value <= hi
    summary = json.loads((out / "summary.json").read_text())["cells"][0]
    assert summary["items_never_corrected"] == c.items_never_corrected
