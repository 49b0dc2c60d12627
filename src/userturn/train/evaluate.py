"""Before/after: the same probe grid on the base model and on the trained one.

Both sides go through the ``hf:`` backend (the base as ``hf:BASE``, the trained model as
``hf:BASE?adapter=OUT``), never llama.cpp for one and transformers for the other, so
the only difference between the two runs is the training. The grid (datasets, T, k,
budgets, judges) is one ``RunConfig``; each side is an ordinary run directory, so it
resumes, reports and compares like any other (``userturn compare BEFORE AFTER``).

Training items must not be evaluation items: DPO pairs come from probe items, and a
rate measured on them says how well the pairs were memorised, not whether awareness
rose. The overlap is computed and recorded; the CLI warns when it is not empty.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from userturn.analysis.cell import CellSummary, JudgedCell
from userturn.analysis.compare import CompareRow, compare_runs
from userturn.analysis.tables import Table, pct, rate_ci, temp
from userturn.config import RunConfig, build_config, load_config
from userturn.run import driver
from userturn.run.outputs import write_json

log = logging.getLogger(__name__)

COMPARISON_JSON = "comparison.json"
COMPARISON_MD = "comparison.md"

CORRECTED_COLUMNS = (
    "corrected before [95% CI]",
    "corrected after [95% CI]",
    "Δ corrected pts [95% CI]",
)
"""Shown when some row's judge has a card; comparison.json has the numbers on every row."""


@dataclass
class BeforeAfter:
    before: Path
    after: Path
    rows: list[CompareRow]
    overlap: list[str]
    table: Table

    def to_json(self) -> dict[str, Any]:
        return {
            "before": str(self.before),
            "after": str(self.after),
            "rows": [r.to_json() for r in self.rows],
            "train_eval_overlap": self.overlap,
        }


def side_config(cfg: RunConfig, model: str) -> RunConfig:
    return cfg.model_copy(update={"models": [model]})


def eval_items(result: driver.RunResult) -> set[str]:
    return {f"{job.dataset.id}/{it.id}" for job in result.jobs for it in job.items}


def before_after(
    cfg: RunConfig,
    base_spec: str,
    trained_spec: str,
    out: Path,
    *,
    before_dir: Path | None = None,
    train_items: list[str] | None = None,
    progress: driver.Progress | None = None,
) -> BeforeAfter:
    """Run the grid on both models and write ``comparison.json`` / ``comparison.md``.

    ``before_dir`` lets several trainings share one base run (it resumes, so a base
    run already done costs no model call).
    """
    before_dir = before_dir or out / "before"
    after_dir = out / "after"
    log.info("before/after: %s -> %s, %s -> %s", base_spec, before_dir, trained_spec, after_dir)
    before = driver.run(side_config(cfg, base_spec), before_dir, progress)
    after = driver.run(side_config(cfg, trained_spec), after_dir, progress)
    overlap = sorted(eval_items(after) & set(train_items or []))
    rows = compare_runs(before_dir, after_dir)
    table = before_after_table(rows, before.cells, after.cells)
    result = BeforeAfter(before_dir, after_dir, rows, overlap, table)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / COMPARISON_JSON, result.to_json())
    (out / COMPARISON_MD).write_text(table.to_markdown(), encoding="utf-8")
    return result


def _key(c: CellSummary | CompareRow) -> tuple[Any, ...]:
    return (c.dataset, c.temperature, c.perturbation, c.judge)


def _pts(d: float | None, lo: float | None, hi: float | None) -> str:
    if d is None:
        return "–"
    ci = "" if lo is None or hi is None else f" [{100 * lo:+.1f}, {100 * hi:+.1f}]"
    return f"{100 * d:+.1f}{ci}"


def before_after_table(
    rows: list[CompareRow], before: list[CellSummary], after: list[CellSummary]
) -> Table:
    """Per matched cell (one per T): each side's rate with its own 95% CI, the change
    with its CI (``compare_runs``: paired cluster bootstrap when the items match), the
    same three corrected for the judge's errors when its judge has a card (the run
    tables' correction, and the paired corrected Δ of ``compare_runs``: a raw change is
    shrunk by the judge's se + sp - 1, and a raw rate near the judge's false-positive
    rate is no evidence), and accuracy before/after."""
    cells_b = {_key(c): c for c in before}
    cells_a = {_key(c): c for c in after}
    corrected = any(r.judge_card for r in rows)
    cols = [
        "dataset",
        "T",
        "perturbation",
        "judge",
        "n before/after",
        "rate before [95% CI]",
        "rate after [95% CI]",
        "Δ rate pts [95% CI]",
        *CORRECTED_COLUMNS[: 3 if corrected else 0],
        "accuracy before",
        "accuracy after",
        "Δ accuracy pts [95% CI]",
        "CI method",
    ]
    raw, shown = [], []
    for r in rows:
        k = _key(r)
        b, a = cells_b.get(k), cells_a.get(k)
        n = f"{r.n_a}/{r.n_b}"
        fixed = [r.rate_corrected_a, r.rate_corrected_b, r.rate_corrected_diff]
        raw.append(
            [
                *k,
                n,
                r.rate_a,
                r.rate_b,
                r.rate_diff,
                *fixed[: 3 if corrected else 0],
                r.accuracy_a,
                r.accuracy_b,
                r.accuracy_diff,
                r.rate_method,
            ]
        )
        shown.append(
            [
                str(r.dataset),
                temp(r.temperature),
                str(r.perturbation),
                str(r.judge),
                n,
                rate_ci(r.rate_a, *_ci(b)),
                rate_ci(r.rate_b, *_ci(a)),
                _pts(r.rate_diff, r.rate_ci_low, r.rate_ci_high),
                *(_corrected_shown(r) if corrected else []),
                pct(r.accuracy_a),
                pct(r.accuracy_b),
                _pts(r.accuracy_diff, r.accuracy_ci_low, r.accuracy_ci_high),
                r.rate_method,
            ]
        )
    models = sorted({f"before={r.model_a}, after={r.model_b}" for r in rows})
    note = "Δ is after − before in percentage points, with 95% CIs."
    cards = sorted({r.judge_card for r in rows if r.judge_card})
    if cards:
        note += (
            " Corrected: the judge's error rates for each side's strata removed (Rogan–"
            f"Gladen with judge card {', '.join(cards)}, as in the run tables); Δ corrected"
            " is the paired Δ over the judge's se + sp − 1 when both sides use the same"
            " strata, else the difference of the corrected rates without a CI."
        )
    return Table(
        "before_after",
        "Genuine follow-up rate before vs after training (" + "; ".join(models) + ")",
        cols,
        raw,
        shown,
        note=note,
    )


def _corrected_shown(r: CompareRow) -> list[str]:
    return [
        rate_ci(r.rate_corrected_a, r.rate_corrected_ci_low_a, r.rate_corrected_ci_high_a),
        rate_ci(r.rate_corrected_b, r.rate_corrected_ci_low_b, r.rate_corrected_ci_high_b),
        _pts(r.rate_corrected_diff, r.rate_corrected_diff_ci_low, r.rate_corrected_diff_ci_high),
    ]


def eval_config(
    config_file: Path | None, from_run: Path | None, overrides: dict[str, Any]
) -> RunConfig:
    """The grid to evaluate: ``--eval-config FILE``, else the source run's own grid
    (DPO: "the same probe grid"), else the defaults; CLI overrides win. The config's
    ``models`` are replaced by the base and the trained model."""
    flags = {k: v for k, v in overrides.items() if v is not None and v != []}
    if config_file is not None:
        return load_config(config_file, flags)
    manifest = from_run / "manifest.yaml" if from_run is not None else None
    if manifest is not None and manifest.is_file():
        return load_config(manifest, flags)
    return build_config(flags)


def _ci(c: CellSummary | None) -> tuple[float | None, float | None]:
    return (c.ci_low, c.ci_high) if isinstance(c, JudgedCell) else (None, None)
