"""Compare two runs cell by cell: did the rate (and accuracy) change, and by how much?

The typical use is before/after: the same grid on a base model and on a trained one.
Cells are matched on (dataset, temperature, perturbation, judge, probe, turn), so the
model and the config may differ; each run must then hold one model and one config per
matched cell (pass ``model_a`` / ``model_b`` to pick one from a multi-model run).
Differences are **B minus A**.

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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from userturn.analysis.cards import judge_cards
from userturn.analysis.cell import CellSummary, JudgedCell, LikelihoodCell, cell_from_json
from userturn.analysis.cells import Cell, collect_cells, likelihood_cells
from userturn.analysis.claims import corrected_paired_delta
from userturn.analysis.correction import cell_error_draws
from userturn.analysis.intervals import (
    BOOTSTRAP_REPS,
    independent_diff_interval,
    newcombe_diff,
    paired_diff_interval,
)
from userturn.analysis.tables import Table, pct, temp
from userturn.errors import UserError
from userturn.rundir.store import STORE_NAME, open_run

log = logging.getLogger(__name__)
MatchKey = tuple[str, float | None, str, str | None, str, int | None]


@dataclass
class Side:
    """One run's cell, from the store (with per-item data) or from summary.json."""

    summary: CellSummary
    per_item: dict[str, tuple[int, int]] | None = None
    correct: dict[str, bool] | None = None
    samples: int = 1
    card: dict[str, Any] | None = None
    """The judge's card the summary was corrected with (store sides only): the corrected
    difference draws the judge's error rates from it."""

    @classmethod
    def from_cell(cls, cell: Cell, card: dict[str, Any] | None = None) -> Side:
        correct = {
            a.item_id: bool(a.correct) for a in cell.answers.values() if a.correct is not None
        }
        return cls(
            cell.summary(card),
            {k: (v[0], v[1]) for k, v in cell.per_item.items()},
            correct,
            max(cell.max_samples, 1),
            card,
        )


@dataclass
class Comparison:
    rows: list[CompareRow]
    only_a: list[MatchKey] = field(default_factory=list)
    only_b: list[MatchKey] = field(default_factory=list)


def _load_sides(run: Path, model: str | None) -> dict[MatchKey, Side]:
    summary = run / "summary.json"
    if (run / STORE_NAME).is_file() or not summary.is_file():
        with open_run(run) as store:
            cards = judge_cards(store)
            sides = [Side.from_cell(c, cards.get(c.judge or "")) for c in collect_cells(store)]
            sides += [Side(c) for c in likelihood_cells(store)]
    elif summary.is_file():
        sides = [Side(c, samples=_samples(c)) for c in _summary_cells(summary)]
    else:
        raise UserError("not a run directory (no store.sqlite or summary.json)", file=str(run))
    return _index(sides, run, model)


def _samples(c: CellSummary) -> int:
    """Samples per context: a likelihood cell scores each context once."""
    return max(c.samples, 1) if isinstance(c, JudgedCell) else 1


def _summary_cells(path: Path) -> list[CellSummary]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [cell_from_json(c) for c in data["cells"]]
    except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise UserError(
            f"not a summary.json this userturn can read ({exc})", file=str(path)
        ) from exc


def _index(sides: list[Side], run: Path, model: str | None) -> dict[MatchKey, Side]:
    out: dict[MatchKey, Side] = {}
    for s in sides:
        c = s.summary
        if model is not None and c.model != model:
            continue
        key = (c.dataset, c.temperature, c.perturbation, c.judge, c.probe, c.turn)
        if key in out:
            what = "models" if out[key].summary.model != c.model else "configs"
            raise UserError(
                f"several {what} in one cell ({out[key].summary.model!r} "
                f"[{out[key].summary.config}], {c.model!r} [{c.config}]); "
                "choose a model with --model-a/--model-b, or compare one config",
                file=str(run),
            )
        out[key] = s
    if model is not None and not out:
        raise UserError(f"model {model!r} not in this run", file=str(run))
    return out


def _rate_diff(
    a: Side, b: Side, ca: JudgedCell, cb: JudgedCell
) -> tuple[float | None, float | None, str]:
    if a.per_item is not None and b.per_item is not None:
        if set(a.per_item) == set(b.per_item):
            items = sorted(a.per_item)
            (lo, hi), m = paired_diff_interval(
                [b.per_item[i] for i in items], [a.per_item[i] for i in items]
            )
        else:
            (lo, hi), m = independent_diff_interval(
                list(b.per_item.values()), list(a.per_item.values())
            )
        return lo, hi, m
    lo, hi = newcombe_diff(cb.genuine, cb.n, ca.genuine, ca.n)
    method = "newcombe" if max(a.samples, b.samples) == 1 else "newcombe (ignores k>1)"
    return lo, hi, method


SHARED_ERRORS = "paired, shared error rates"
"""``rate_corrected_method`` when the corrected difference has a CI."""


def _corrected_diff(
    a: Side, b: Side, ca: JudgedCell, cb: JudgedCell, raw_ci: tuple[float | None, float | None]
) -> tuple[float | None, float | None, float | None, str]:
    """B − A corrected for the judge's errors: (difference, CI low, CI high, method).

    When both sides were corrected with the same card and the same strata of it (the
    judge is taken to err alike on both, as the per-side corrections assume) and their
    items match, the Rogan–Gladen specificity term cancels: the difference is the paired
    raw one over Youden's J, with the interval the run's perturbation and temperature
    deltas use (``claims.corrected_paired_delta``). Otherwise the two corrected rates
    rest on different error rates, or on no per-item data (a summary.json alone), and
    no joint draw of both exists here: the difference of the corrected rates is given
    without a CI, and the method says why.
    """
    if ca.rate_corrected is None or cb.rate_corrected is None:
        return None, None, None, ""
    why = ""
    if a.per_item is None or b.per_item is None or a.card is None:
        why = "no per-item data"
    elif set(a.per_item) != set(b.per_item):
        why = "items differ"
    elif ca.judge_card_sha != cb.judge_card_sha:
        why = "sides corrected with different cards"  # e.g. one run carries its own card
    elif ca.judge_card != cb.judge_card or ca.correction_strata != cb.correction_strata:
        why = "sides corrected with different card strata"
    if why or a.per_item is None or b.per_item is None or a.card is None:
        return cb.rate_corrected - ca.rate_corrected, None, None, f"no CI: {why}"
    draws = cell_error_draws(a.card, ca.dataset, ca.model, ca.family, reps=BOOTSTRAP_REPS)
    items = sorted(a.per_item)
    got = corrected_paired_delta(
        [b.per_item[i] for i in items],
        [a.per_item[i] for i in items],
        raw_ci,
        draws.sens + draws.spec - 1,
    )
    return got.delta, got.ci_low, got.ci_high, SHARED_ERRORS


def _acc_diff(
    a: Side, b: Side, ca: JudgedCell, cb: JudgedCell
) -> tuple[float | None, float | None, float | None, str]:
    if ca.accuracy is None or cb.accuracy is None:
        return None, None, None, ""
    diff = cb.accuracy - ca.accuracy
    if a.correct is not None and b.correct is not None and set(a.correct) == set(b.correct):
        items = sorted(a.correct)
        (lo, hi), m = paired_diff_interval(
            [(int(b.correct[i]), 1) for i in items], [(int(a.correct[i]), 1) for i in items]
        )
        return diff, lo, hi, m
    if a.correct is not None and b.correct is not None:
        ka, na = sum(a.correct.values()), len(a.correct)
        kb, nb = sum(b.correct.values()), len(b.correct)
    else:
        na, nb = ca.n_answers, cb.n_answers
        ka, kb = round(ca.accuracy * na), round(cb.accuracy * nb)
    lo, hi = newcombe_diff(kb, nb, ka, na)
    return diff, lo, hi, "newcombe"


@dataclass(frozen=True)
class CompareRow:
    """One matched cell: B − A in rate (raw and judge-corrected) and accuracy."""

    dataset: str
    temperature: float | None
    perturbation: str
    judge: str | None
    model_a: str
    model_b: str
    config_a: str
    config_b: str
    n_a: int
    n_b: int
    rate_a: float | None
    rate_b: float | None
    rate_diff: float | None
    rate_ci_low: float | None
    rate_ci_high: float | None
    rate_method: str
    rate_corrected_a: float | None
    rate_corrected_b: float | None
    judge_card: str | None
    accuracy_a: float | None
    accuracy_b: float | None
    accuracy_diff: float | None
    accuracy_ci_low: float | None
    accuracy_ci_high: float | None
    accuracy_method: str
    unparseable_a: int
    unparseable_b: int
    likelihood: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    """Likelihood cells: each version 2 measure in A and in B (``LIKELIHOOD_MEASURES``)."""
    rate_corrected_ci_low_a: float | None = None
    rate_corrected_ci_high_a: float | None = None
    rate_corrected_ci_low_b: float | None = None
    rate_corrected_ci_high_b: float | None = None
    """Each side's corrected rate CI, as its own run's summary.json has it."""
    rate_corrected_diff: float | None = None
    rate_corrected_diff_ci_low: float | None = None
    rate_corrected_diff_ci_high: float | None = None
    rate_corrected_method: str = ""
    """How the corrected difference was found (:func:`_corrected_diff`); "" when a side
    has no corrected rate."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


LIKELIHOOD_MEASURES = ("pmi_share", "pmi_excess_share", "pmi_mean", "role_share", "role_auc")
"""The likelihood probe's measures shown side by side (their CIs are in each run's table)."""


def _matched(key: MatchKey, ca: CellSummary, cb: CellSummary) -> dict[str, Any]:
    """What every row says of the two cells it matched, whatever their probe."""
    return {
        "dataset": key[0],
        "temperature": key[1],
        "perturbation": key[2],
        "judge": key[3],
        "model_a": ca.model,
        "model_b": cb.model,
        "config_a": ca.config,
        "config_b": cb.config,
        "n_a": ca.n,
        "n_b": cb.n,
    }


def _row(key: MatchKey, a: Side, b: Side) -> CompareRow:
    ca, cb = a.summary, b.summary
    if not (isinstance(ca, JudgedCell) and isinstance(cb, JudgedCell)):
        return _likelihood_row(key, ca, cb)
    lo, hi, method = _rate_diff(a, b, ca, cb)
    acc, alo, ahi, amethod = _acc_diff(a, b, ca, cb)
    fixed, flo, fhi, fmethod = _corrected_diff(a, b, ca, cb, (lo, hi))
    rd = None if ca.rate is None or cb.rate is None else cb.rate - ca.rate
    return CompareRow(
        **_matched(key, ca, cb),
        rate_a=ca.rate,
        rate_b=cb.rate,
        rate_diff=rd,
        rate_ci_low=lo,
        rate_ci_high=hi,
        rate_method=method,
        rate_corrected_a=ca.rate_corrected,
        rate_corrected_b=cb.rate_corrected,
        judge_card=ca.judge_card or cb.judge_card,
        accuracy_a=ca.accuracy,
        accuracy_b=cb.accuracy,
        accuracy_diff=acc,
        accuracy_ci_low=alo,
        accuracy_ci_high=ahi,
        accuracy_method=amethod,
        unparseable_a=ca.failed,
        unparseable_b=cb.failed,
        rate_corrected_ci_low_a=ca.ci_corrected_low,
        rate_corrected_ci_high_a=ca.ci_corrected_high,
        rate_corrected_ci_low_b=cb.ci_corrected_low,
        rate_corrected_ci_high_b=cb.ci_corrected_high,
        rate_corrected_diff=fixed,
        rate_corrected_diff_ci_low=flo,
        rate_corrected_diff_ci_high=fhi,
        rate_corrected_method=fmethod,
    )


def _likelihood_row(key: MatchKey, ca: CellSummary, cb: CellSummary) -> CompareRow:
    """A likelihood cell has no judged rate: its measures are compared side by side."""
    assert isinstance(ca, LikelihoodCell) and isinstance(cb, LikelihoodCell), "same probe"
    return CompareRow(
        **_matched(key, ca, cb),
        rate_a=None,
        rate_b=None,
        rate_diff=None,
        rate_ci_low=None,
        rate_ci_high=None,
        rate_method="likelihood measures",
        rate_corrected_a=None,
        rate_corrected_b=None,
        judge_card=None,
        accuracy_a=None,
        accuracy_b=None,
        accuracy_diff=None,
        accuracy_ci_low=None,
        accuracy_ci_high=None,
        accuracy_method="",
        unparseable_a=0,
        unparseable_b=0,
        likelihood={m: (getattr(ca, m), getattr(cb, m)) for m in LIKELIHOOD_MEASURES},
    )


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
) -> list[CompareRow]:
    """Cells matched on (dataset, T, perturbation, judge), with B − A differences and CIs.

    Args:
        a: the first run directory (e.g. the base model).
        b: the second run directory (e.g. the trained model).
        model_a: pick this model's cells from run A if it holds several models.
        model_b: likewise for run B.

    Returns:
        One :class:`CompareRow` per matched cell: ``rate_a``, ``rate_b``, ``rate_diff`` with
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


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def compare_table(rows: list[CompareRow]) -> Table:
    """The comparison as a :class:`~userturn.analysis.tables.Table` (Markdown/CSV/LaTeX),
    with the judge-corrected rates beside the raw ones when the judge has a card."""
    corrected = any(r.judge_card for r in rows)
    cols = ["dataset", "T", "perturbation", "judge", "rate A", "rate B", "Δ rate (pts)"]
    cols += ["corrected A", "corrected B"] if corrected else []
    cols += ["acc A", "acc B", "Δ acc (pts)", "n A/B", "unparseable A/B", "CI method"]
    lik = any(r.likelihood for r in rows)
    cols += [f"{m} A/B" for m in LIKELIHOOD_MEASURES] if lik else []
    raw, shown = [], []
    for r in rows:
        fixed = [r.rate_corrected_a, r.rate_corrected_b] if corrected else []
        measures = [r.likelihood.get(m, (None, None)) for m in LIKELIHOOD_MEASURES] if lik else []
        counts = [f"{r.n_a}/{r.n_b}", f"{r.unparseable_a}/{r.unparseable_b}", r.rate_method]
        key = [r.dataset, r.temperature, r.perturbation, r.judge]
        accs = [r.accuracy_a, r.accuracy_b, r.accuracy_diff]
        raw.append([*key, r.rate_a, r.rate_b, r.rate_diff, *fixed, *accs, *counts, *measures])
        shown.append(
            [r.dataset, temp(r.temperature), r.perturbation, str(r.judge)]
            + [pct(r.rate_a), pct(r.rate_b), _pts(r.rate_diff, r.rate_ci_low, r.rate_ci_high)]
            + [pct(x) for x in fixed]
            + [pct(r.accuracy_a), pct(r.accuracy_b)]
            + [_pts(r.accuracy_diff, r.accuracy_ci_low, r.accuracy_ci_high)]
            + [f"{r.n_a}/{r.n_b}", f"{r.unparseable_a}/{r.unparseable_b}", r.rate_method]
            + [f"{_num(a)}/{_num(b)}" for a, b in measures]
        )
    models = sorted({f"A={r.model_a}, B={r.model_b}" for r in rows})
    cards = sorted({r.judge_card for r in rows if r.judge_card})
    note = "Differences are B − A in percentage points, with 95% CIs."
    if cards:
        note += f" Corrected rates: Rogan–Gladen with judge card {', '.join(cards)}."
    return Table("compare", "Run comparison (" + "; ".join(models) + ")", cols, raw, shown, note)
