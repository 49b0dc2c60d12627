"""``compare_runs`` and ``userturn compare``: B − A per matched cell, with CIs.

Run: ``.venv/bin/python -m pytest tests/test_compare.py -q`` (a few seconds, no model).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from synthetic_runs import Spec, build_run
from userturn.analysis.compare import compare_runs, compare_table
from userturn.cli import main
from userturn.errors import UserError


def _always(genuine: bool):  # type: ignore[no-untyped-def]
    def outcome(m: str, i: int, t: float, s: int, p: str) -> tuple[str, bool, str]:
        return "ok", genuine, "plausible_followup" if genuine else "previous_turn_restate"

    return outcome


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("cmp")
    a = build_run(base / "a", Spec(models={"base": "qwen"}, items=5, outcome=_always(False)))
    b = build_run(
        base / "b",
        Spec(models={"tuned": "qwen"}, items=5, outcome=_always(True), correct=lambda m, i: True),
    )
    return a, b


def test_paired_comparison_of_same_items(runs: tuple[Path, Path]) -> None:
    a, b = runs
    rows = compare_runs(a, b)
    spec = Spec()
    assert len(rows) == len(spec.datasets) * len(spec.temps) * len(spec.perts)
    for r in rows:
        assert (r.model_a, r.model_b) == ("base", "tuned")
        assert r.rate_a == 0.0 and r.rate_b == 1.0 and r.rate_diff == 1.0
        assert r.rate_method in ("bonett-price", "paired-cluster-bootstrap+bonett-price-floor")
        # the two runs never vary, yet the interval stays honest: not a point at +100
        assert r.rate_ci_low < 1.0 and r.rate_ci_high == pytest.approx(1.0)
    gsm = next(r for r in rows if r.dataset == "gsm8k")
    expected_a = sum(Spec().correct("base", i) for i in range(5)) / 5
    assert gsm.accuracy_a == pytest.approx(expected_a)
    assert gsm.accuracy_diff == pytest.approx(1.0 - expected_a)
    assert gsm.accuracy_method == "bonett-price"
    chat = next(r for r in rows if r.dataset == "chat")
    assert chat.accuracy_diff is None


def test_summary_only_runs_fall_back_to_newcombe(runs: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = runs
    for src in (a, b):
        (tmp_path / src.name).mkdir()
        shutil.copy(src / "summary.json", tmp_path / src.name / "summary.json")
    rows = compare_runs(tmp_path / "a", tmp_path / "b")
    t0 = next(r for r in rows if r.temperature == 0.0)
    assert t0.rate_method == "newcombe"
    t1 = next(r for r in rows if r.temperature == 1.0)
    assert t1.rate_method == "newcombe (ignores k>1)"
    assert 0 < t1.rate_ci_low < 1.0 <= t1.rate_ci_high + 1e-9


def test_multi_model_runs_need_a_model_choice(tmp_path: Path) -> None:
    run = build_run(tmp_path / "multi", Spec(items=2, temps=(0.0,), perts=("none",)))
    with pytest.raises(UserError, match="several models"):
        compare_runs(run, run)
    rows = compare_runs(run, run, model_a="qwen-a", model_b="llama-c")
    assert {r.model_b for r in rows} == {"llama-c"}
    with pytest.raises(UserError, match="not in this run"):
        compare_runs(run, run, model_a="nope")


def test_table_and_cli(runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    a, b = runs
    table = compare_table(compare_runs(a, b))
    assert (
        "+100.0 [+" in table.to_markdown() and "+100.0 [+100.0, +100.0]" not in table.to_markdown()
    )
    assert main(["compare", str(a), str(b), "--format", "md"]) == 0
    out = capsys.readouterr().out
    assert "A=base, B=tuned" in out and "| gsm8k | 0 | none | rules |" in out
    assert main(["compare", str(a), str(b), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["rows"]) == len(compare_runs(a, b)) and data["only_a"] == []
    assert main(["compare", str(a), str(a.parent / "missing")]) == 2
    assert "run directory not found" in capsys.readouterr().err


def test_likelihood_cells_compare_their_measures() -> None:
    """A likelihood cell has no judged rate; compare shows its v2 measures side by side."""
    from userturn.analysis.cell import LikelihoodCell
    from userturn.analysis.compare import Side, _row, compare_table

    def cell(pmi: float, role: float) -> LikelihoodCell:
        return LikelihoodCell(
            model="m", dataset="healthbench", temperature=None, perturbation="none",
            judge=None, config="c", n=8, pmi_share=pmi, role_share=role,
        )  # fmt: skip

    key = ("healthbench", None, "none", None, "likelihood", None)
    row = _row(key, Side(cell(0.5, 0.75)), Side(cell(0.625, 1.0)))
    assert row.rate_diff is None and row.rate_method == "likelihood measures"
    assert row.likelihood["pmi_share"] == (0.5, 0.625)
    assert row.likelihood["role_share"] == (0.75, 1.0)
    table = compare_table([row])
    assert "pmi_share A/B" in table.columns and "0.50/0.62" in table.shown[0]
