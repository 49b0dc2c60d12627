"""Compare two runs cell by cell: did the rate (and accuracy) change, and by how much?

The typical use is before/after: the same grid on a base model and on a trained one.
Cells are matched on (dataset, temperature, perturbation, judge), so the model may
differ; each run must then hold one model per matched cell (pass ``model_a`` /
``model_b`` to pick one from a multi-model run). Differences are **B minus A**.

Intervals, in order of preference:
- both runs' stores cover the same items → paired cluster bootstrap over items (the
  before/after design: an item's difficulty cancels out);
- otherwise, one sample per context in both → Newcombe's interval for independent
  proportions;
- otherwise → an independent cluster bootstrap, each run resampled by item.
A run directory without its store (only ``summary.json``) can still be compared, with
Newcombe from the cell counts; the method column says so.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from userturn.analysis.cells import Cell, collect_cells
from userturn.analysis.intervals import (
    independent_bootstrap_diff,
    newcombe_diff,
    paired_bootstrap_diff,
)
from userturn.analysis.tables import Table, pct
from userturn.errors import UserError
from userturn.store import Store

log = logging.getLogger(__name__)
MatchKey = tuple[str, float | None, str, str | None]


@dataclass
class Side:
    """One run's cell, from the store (with per-item data) or from summary.json."""

    summary: dict[str, Any]
    per_item: dict[str, tuple[int, int]] | None = None
    correct: dict[str, bool] | None = None
    samples: int = 1

    @classmethod
    def from_cell(cls, cell: Cell) -> Side:
        correct = {
            a.item_id: bool(a.correct) for a in cell.answers.values() if a.correct is not None
        }
        return cls(
            cell.to_json(),
            {k: (v[0], v[1]) for k, v in cell.per_item.items()},
            correct,
            max(cell.max_samples, 1),
        )


@dataclass
class Comparison:
    rows: list[dict[str, Any]]
    only_a: list[MatchKey] = field(default_factory=list)
    only_b: list[MatchKey] = field(default_factory=list)


def _load_sides(run: Path, model: str | None) -> dict[MatchKey, Side]:
    if not run.is_dir():
        raise UserError("run directory not found", file=str(run))
    store_path, summary = run / "store.sqlite", run / "summary.json"
    if store_path.is_file():
        store = Store(store_path)
        try:
            sides = [Side.from_cell(c) for c in collect_cells(store)]
        finally:
            store.close()
    elif summary.is_file():
        cells = json.loads(summary.read_text(encoding="utf-8")).get("cells", [])
        sides = [Side(c, samples=int(c.get("samples") or 1)) for c in cells]
    else:
        raise UserError("not a run directory (no store.sqlite or summary.json)", file=str(run))
    return _index(sides, run, model)


def _index(sides: list[Side], run: Path, model: str | None) -> dict[MatchKey, Side]:
    out: dict[MatchKey, Side] = {}
    for s in sides:
        c = s.summary
        if model is not None and c["model"] != model:
            continue
        key = (c["dataset"], c["temperature"], c["perturbation"], c["judge"])
        if key in out:
            raise UserError(
                f"several models in one cell ({out[key].summary['model']!r}, "
                f"{c['model']!r}); choose one with --model-a/--model-b",
                file=str(run),
            )
        out[key] = s
    if model is not None and not out:
        raise UserError(f"model {model!r} not in this run", file=str(run))
    return out


def _rate_diff(a: Side, b: Side) -> tuple[float | None, float | None, str]:
    ca, cb = a.summary, b.summary
    if a.per_item is not None and b.per_item is not None:
        if set(a.per_item) == set(b.per_item):
            items = sorted(a.per_item)
            lo, hi = paired_bootstrap_diff(
                [b.per_item[i] for i in items], [a.per_item[i] for i in items]
            )
            return lo, hi, "paired-cluster-bootstrap"
        if max(a.samples, b.samples) > 1:
            lo, hi = independent_bootstrap_diff(
                list(b.per_item.values()), list(a.per_item.values())
            )
            return lo, hi, "independent-cluster-bootstrap"
    lo, hi = newcombe_diff(cb["genuine"], cb["n"], ca["genuine"], ca["n"])
    method = "newcombe" if max(a.samples, b.samples) == 1 else "newcombe (ignores k>1)"
    return lo, hi, method


def _acc_diff(a: Side, b: Side) -> tuple[float | None, float | None, float | None, str]:
    ca, cb = a.summary, b.summary
    if ca.get("accuracy") is None or cb.get("accuracy") is None:
        return None, None, None, ""
    diff = cb["accuracy"] - ca["accuracy"]
    if a.correct is not None and b.correct is not None and set(a.correct) == set(b.correct):
        items = sorted(a.correct)
        lo, hi = paired_bootstrap_diff(
            [(int(b.correct[i]), 1) for i in items], [(int(a.correct[i]), 1) for i in items]
        )
        return diff, lo, hi, "paired-bootstrap"
    if a.correct is not None and b.correct is not None:
        ka, na = sum(a.correct.values()), len(a.correct)
        kb, nb = sum(b.correct.values()), len(b.correct)
    else:
        na, nb = int(ca.get("n_answers") or 0), int(cb.get("n_answers") or 0)
        ka, kb = round(ca["accuracy"] * na), round(cb["accuracy"] * nb)
    lo, hi = newcombe_diff(kb, nb, ka, na)
    return diff, lo, hi, "newcombe"


def _row(key: MatchKey, a: Side, b: Side) -> dict[str, Any]:
    ca, cb = a.summary, b.summary
    lo, hi, method = _rate_diff(a, b)
    acc, alo, ahi, amethod = _acc_diff(a, b)
    rd = None if ca["rate"] is None or cb["rate"] is None else cb["rate"] - ca["rate"]
    return {
        "dataset": key[0],
        "temperature": key[1],
        "perturbation": key[2],
        "judge": key[3],
        "model_a": ca["model"],
        "model_b": cb["model"],
        "n_a": ca["n"],
        "n_b": cb["n"],
        "rate_a": ca["rate"],
        "rate_b": cb["rate"],
        "rate_diff": rd,
        "rate_ci_low": lo,
        "rate_ci_high": hi,
        "rate_method": method,
        "accuracy_a": ca.get("accuracy"),
        "accuracy_b": cb.get("accuracy"),
        "accuracy_diff": acc,
        "accuracy_ci_low": alo,
        "accuracy_ci_high": ahi,
        "accuracy_method": amethod,
        "unparseable_a": int(ca.get("unparseable", 0)) + int(ca.get("errors", 0)),
        "unparseable_b": int(cb.get("unparseable", 0)) + int(cb.get("errors", 0)),
    }


def compare_detail(
    a: Path, b: Path, model_a: str | None = None, model_b: str | None = None
) -> Comparison:
    """Matched rows plus the cells found in only one of the runs."""
    sa, sb = _load_sides(Path(a), model_a), _load_sides(Path(b), model_b)
    keys = [k for k in sa if k in sb]
    only_a, only_b = [k for k in sa if k not in sb], [k for k in sb if k not in sa]
    if only_a or only_b:
        log.info("unmatched cells: %d only in A, %d only in B", len(only_a), len(only_b))
    return Comparison([_row(k, sa[k], sb[k]) for k in keys], only_a, only_b)


def compare_runs(
    a: Path, b: Path, model_a: str | None = None, model_b: str | None = None
) -> list[dict[str, Any]]:
    """Cells matched on (dataset, T, perturbation, judge), with B − A differences and CIs.

    Args:
        a: the first run directory (e.g. the base model).
        b: the second run directory (e.g. the trained model).
        model_a: pick this model's cells from run A if it holds several models.
        model_b: likewise for run B.

    Returns:
        One dict per matched cell: ``rate_a``, ``rate_b``, ``rate_diff`` with
        ``rate_ci_low``/``rate_ci_high`` and ``rate_method``; the same for accuracy
        (``accuracy_*``, None where a dataset is not scored); n and unparseable counts.
    """
    return compare_detail(a, b, model_a, model_b).rows


def _pts(d: float | None, lo: float | None, hi: float | None) -> str:
    if d is None:
        return "–"
    if lo is None or hi is None:
        return f"{100 * d:+.1f}"
    return f"{100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"


def compare_table(rows: list[dict[str, Any]]) -> Table:
    """The comparison as a :class:`~userturn.tables.Table` (Markdown/CSV/LaTeX)."""
    cols = [
        "dataset",
        "T",
        "perturbation",
        "judge",
        "rate A",
        "rate B",
        "Δ rate (pts)",
        "acc A",
        "acc B",
        "Δ acc (pts)",
        "n A/B",
        "unparseable A/B",
        "CI method",
    ]
    raw, shown = [], []
    for r in rows:
        raw.append(
            [
                r["dataset"],
                r["temperature"],
                r["perturbation"],
                r["judge"],
                r["rate_a"],
                r["rate_b"],
                r["rate_diff"],
                r["accuracy_a"],
                r["accuracy_b"],
                r["accuracy_diff"],
                f"{r['n_a']}/{r['n_b']}",
                f"{r['unparseable_a']}/{r['unparseable_b']}",
                r["rate_method"],
            ]
        )
        shown.append(
            [
                r["dataset"],
                "–" if r["temperature"] is None else f"{r['temperature']:g}",
                r["perturbation"],
                str(r["judge"]),
                pct(r["rate_a"]),
                pct(r["rate_b"]),
                _pts(r["rate_diff"], r["rate_ci_low"], r["rate_ci_high"]),
                pct(r["accuracy_a"]),
                pct(r["accuracy_b"]),
                _pts(r["accuracy_diff"], r["accuracy_ci_low"], r["accuracy_ci_high"]),
                f"{r['n_a']}/{r['n_b']}",
                f"{r['unparseable_a']}/{r['unparseable_b']}",
                r["rate_method"],
            ]
        )
    models = sorted({f"A={r['model_a']}, B={r['model_b']}" for r in rows})
    return Table(
        "compare",
        "Run comparison (" + "; ".join(models) + ")",
        cols,
        raw,
        shown,
        note="Differences are B − A in percentage points, with 95% CIs.",
    )
