"""The paper-level views built from cells: accuracy, label shares, perturbation deltas
and the accuracy-vs-follow-up correlation, plus ``analyze`` which gathers them all for
the report.

Each view is a list of frozen rows (fields, not dict keys). Every grouping includes the
config fingerprint, so no view mixes two experiments.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from userturn.analysis.cards import judge_cards
from userturn.analysis.cell import CellSummary
from userturn.analysis.cells import (
    Answer,
    Cell,
    collect_cells,
    paired_challenges,
    summary_cells,
)
from userturn.analysis.claims import ModelItems, corrected_paired_delta, rho_interval
from userturn.analysis.correction import cell_error_draws
from userturn.analysis.intervals import BOOTSTRAP_REPS, ItemCounts, paired_diff_interval, wilson
from userturn.rundir.store import Store
from userturn.types import CONVERSATION_PROBES


@dataclass(frozen=True)
class AccuracyRow:
    model: str
    family: str
    dataset: str
    config: str
    n_answers: int
    n_scored: int
    correct: int
    accuracy: float | None
    ci_low: float | None
    ci_high: float | None
    answers_truncated: int
    answers_incomplete_reasoning: int


@dataclass(frozen=True)
class LabelShares:
    group: str
    """The model or family name."""
    judge: str | None
    config: str
    n: int
    n_total: int
    unparseable: int
    errors: int
    labels: dict[str, int]
    shares: dict[str, float]


@dataclass(frozen=True)
class DeltaRow:
    model: str
    family: str
    dataset: str
    config: str
    temperature: float | None
    judge: str | None
    perturbation: str
    n_items: int
    n: int
    n_base: int
    rate: float | None
    rate_base: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    ci_method: str
    unparseable: int
    unparseable_base: int
    challenge_rate: float | None = None
    """Share of turns that dispute the answer (perturbed), among verdicts that say."""
    challenge_rate_base: float | None = None
    challenge_delta: float | None = None
    """Paired by item: mean over items of (perturbed - clean) challenge share."""
    challenge_delta_ci_low: float | None = None
    challenge_delta_ci_high: float | None = None
    challenge_items: int = 0
    challenge_delta_correct: float | None = None
    """The same over items whose clean answer was correct."""
    challenge_delta_correct_ci_low: float | None = None
    challenge_delta_correct_ci_high: float | None = None
    challenge_items_correct: int = 0
    challenge_delta_incorrect: float | None = None
    challenge_delta_incorrect_ci_low: float | None = None
    challenge_delta_incorrect_ci_high: float | None = None
    challenge_items_incorrect: int = 0
    delta_corrected: float | None = None
    """The delta with the judge's errors removed (paired, see ``analysis.claims``);
    None without a card."""
    ci_corrected_low: float | None = None
    ci_corrected_high: float | None = None


@dataclass(frozen=True)
class TemperatureDelta:
    """Rate at T minus rate at T=0 on the same items (answers are shared across T)."""

    model: str
    family: str
    dataset: str
    config: str
    judge: str | None
    temperature: float
    n_items: int
    rate: float | None
    rate_base: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    ci_method: str
    delta_corrected: float | None = None
    ci_corrected_low: float | None = None
    ci_corrected_high: float | None = None


@dataclass(frozen=True)
class Correlation:
    judge: str | None
    temperature: float | None
    config: str
    scope: str
    n_points: int
    pearson_r: float | None
    pearson_p: float | None
    spearman_rho: float | None
    spearman_p: float | None
    note: str
    points: list[dict[str, Any]] = field(default_factory=list)
    rho_ci_low: float | None = None
    rho_ci_high: float | None = None
    """Spearman's ρ, 95% bootstrap CI over models and items (model-level scopes)."""
    equivalence: str = ""
    """``|rho| < 0.3 with 95% confidence`` or ``not shown`` (``analysis.claims``)."""


def accuracy_by_model_dataset(cells: Iterable[Cell]) -> list[AccuracyRow]:
    """Task accuracy per (model, dataset, config) over distinct answers, with a Wilson CI.

    Answers are shared by every temperature, sample, perturbation and judge, so they are
    deduplicated by answer key before counting. An answer cut inside its reasoning has
    no final answer and is scored incorrect; it is counted apart as well.
    """
    groups: dict[tuple[str, str, str], tuple[str, dict[str, Answer]]] = {}
    for c in cells:
        fam, answers = groups.setdefault((c.model, c.dataset, c.config), (c.family, {}))
        answers.update(c.answers)
    out = []
    for (model, dataset, config), (fam, answers) in groups.items():
        scored = [a.correct for a in answers.values() if a.correct is not None]
        k = sum(1 for s in scored if s)
        lo, hi = wilson(k, len(scored)) if scored else (None, None)
        out.append(
            AccuracyRow(
                model=model,
                family=fam,
                dataset=dataset,
                config=config,
                n_answers=len(answers),
                n_scored=len(scored),
                correct=k,
                accuracy=k / len(scored) if scored else None,
                ci_low=lo,
                ci_high=hi,
                answers_truncated=sum(1 for a in answers.values() if a.truncated),
                answers_incomplete_reasoning=sum(
                    1 for a in answers.values() if a.incomplete_reasoning
                ),
            )
        )
    return out


def label_distribution(cells: Iterable[Cell], by: str = "model") -> list[LabelShares]:
    """Label counts and shares (of ok judgments) per judge and per model or family."""
    if by not in ("model", "family"):
        raise ValueError(f"by must be 'model' or 'family', got {by!r}")
    groups: dict[tuple[str | None, str, str], dict[str, Any]] = {}
    for c in cells:
        name = c.model if by == "model" else c.family
        g = groups.setdefault(
            (c.judge, name, c.config),
            {"labels": Counter(), "n": 0, "n_total": 0, "unparseable": 0, "errors": 0},
        )
        g["labels"].update(c.labels)
        for k in ("n", "n_total", "unparseable", "errors"):
            g[k] += getattr(c, k)
    out = []
    for (judge, name, config), g in groups.items():
        labels: Counter[str] = g.pop("labels")
        shares = {lab: cnt / g["n"] for lab, cnt in labels.items()} if g["n"] else {}
        out.append(
            LabelShares(
                group=name,
                judge=judge,
                config=config,
                **g,
                labels=dict(sorted(labels.items(), key=lambda kv: (-kv[1], kv[0]))),
                shares=dict(sorted(shares.items(), key=lambda kv: (-kv[1], kv[0]))),
            )
        )
    return out


Cards = dict[str, dict[str, Any]]


def _youden(c: Cell, cards: Cards | None) -> np.ndarray | None:
    card = (cards or {}).get(c.judge or "")
    if card is None:
        return None
    d = cell_error_draws(card, c.dataset, c.model, c.family, reps=BOOTSTRAP_REPS)
    out: np.ndarray = d.sens + d.spec - 1
    return out


def _corrected(
    a: ItemCounts, b: ItemCounts, ci: tuple[float | None, float | None], youden: Any
) -> dict[str, Any]:
    if youden is None:
        return {}
    got = corrected_paired_delta(a, b, ci, youden)
    return {
        "delta_corrected": got.delta,
        "ci_corrected_low": got.ci_low,
        "ci_corrected_high": got.ci_high,
    }


def perturbation_deltas(cells: Iterable[Cell], cards: Cards | None = None) -> list[DeltaRow]:
    """Rate with each perturbation minus the rate without it, per (model, dataset, config,
    T, judge).

    The two conditions share items (the same answers, perturbed or not), so the interval
    is a paired cluster bootstrap over the items present in both cells, and the point
    estimate is computed on those same items. With the judge's card (``cards``) the
    delta is also given corrected for the judge's errors (raw deltas shrink a true effect
    by se + sp - 1).
    """
    cells = list(cells)
    base = {_delta_key(c): c for c in cells if c.perturbation == "none"}
    out = []
    for c in cells:
        ref = base.get(_delta_key(c))
        if c.perturbation == "none" or ref is None:
            continue
        out.append(
            DeltaRow(
                temperature=c.temperature,
                perturbation=c.perturbation,
                n=c.n,
                n_base=ref.n,
                unparseable=c.unparseable + c.errors,
                unparseable_base=ref.unparseable + ref.errors,
                **_challenges(c, ref),
                **_paired(c, ref, cards),
            )
        )
    return out


def temperature_deltas(cells: Iterable[Cell], cards: Cards | None = None) -> list[TemperatureDelta]:
    """Rate at each T > 0 minus the rate at T=0 on the items both have, per (model,
    dataset, config, judge), unperturbed one-turn cells: paired by item, raw and
    corrected."""
    cells = [c for c in cells if c.perturbation == "none" and c.probe not in CONVERSATION_PROBES]
    base = {_temp_key(c): c for c in cells if c.temperature == 0}
    out = []
    for c in cells:
        ref = base.get(_temp_key(c))
        if ref is None or not c.temperature:
            continue
        out.append(TemperatureDelta(temperature=c.temperature, **_paired(c, ref, cards)))
    return out


def _paired(c: Cell, ref: Cell, cards: Cards | None) -> dict[str, Any]:
    """A cell against its reference cell on the items both have: the row's key, both
    rates, the paired difference with its CI, raw and corrected."""
    shared = sorted(set(c.per_item) & set(ref.per_item))
    a, b = c.item_counts(shared), ref.item_counts(shared)
    ra, rb = _pooled(a), _pooled(b)
    (lo, hi), method = paired_diff_interval(a, b)
    return {
        "model": c.model,
        "family": c.family,
        "dataset": c.dataset,
        "config": c.config,
        "judge": c.judge,
        "n_items": len(shared),
        "rate": ra,
        "rate_base": rb,
        "delta": None if ra is None or rb is None else ra - rb,
        "ci_low": lo,
        "ci_high": hi,
        "ci_method": method,
        **_corrected(a, b, (lo, hi), _youden(c, cards)),
    }


def _temp_key(c: Cell) -> tuple[Any, ...]:
    return (c.model, c.dataset, c.config, c.judge)


def _challenges(c: Cell, ref: Cell) -> dict[str, Any]:
    """How often turns dispute the answer, perturbed vs the same items' clean answers
    (``inject-error``'s point: an aware model challenges a wrong answer more often than a
    right one); see ``cells.paired_challenges``."""
    return paired_challenges(c, ref)


def _delta_key(c: Cell) -> tuple[Any, ...]:
    return (c.model, c.dataset, c.config, c.probe, c.turn, c.temperature, c.judge)


def _pooled(counts: ItemCounts) -> float | None:
    n = sum(x[1] for x in counts)
    return sum(x[0] for x in counts) / n if n else None


def correlation(xs: list[float], ys: list[float]) -> dict[str, Any]:
    """Pearson and Spearman with p-values; None (and a note) where they are undefined."""
    out: dict[str, Any] = {
        "n_points": len(xs),
        "pearson_r": None,
        "pearson_p": None,
        "spearman_rho": None,
        "spearman_p": None,
        "note": "",
    }
    if len(xs) < 3:
        out["note"] = f"undefined: {len(xs)} point(s), need at least 3"
    elif len(set(xs)) < 2 or len(set(ys)) < 2:
        out["note"] = "undefined: accuracy or rate is constant across points"
    else:
        from scipy import stats as sstats

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pr = sstats.pearsonr(xs, ys)
            sr = sstats.spearmanr(xs, ys)
        out.update(
            pearson_r=_num(pr[0]),
            pearson_p=_num(pr[1]),
            spearman_rho=_num(sr[0]),
            spearman_p=_num(sr[1]),
        )
    return out


def _num(x: Any) -> float | None:
    v = float(x)
    return None if math.isnan(v) else v


def accuracy_followup_correlation(cells: Iterable[Cell]) -> list[Correlation]:
    """Across models: does task accuracy predict the follow-up rate? (The paper: no.)

    Per dataset, never pooled across datasets (pooling confounds dataset with model):
    points are the models with both an accuracy and a rate, perturbation ``none``, one
    row per (judge, T, dataset), with Spearman's ρ's bootstrap CI over models and items
    and the equivalence statement (``analysis.claims``). A row per (judge, T, dataset),
    scope ``items: DATASET``, asks the same within models: item correctness (0/1)
    against the item's follow-up rate (a point-biserial r), defined with two models.
    """
    groups: dict[tuple[str | None, float | None, str], list[Cell]] = {}
    for c in cells:
        if c.perturbation == "none" and c.accuracy is not None and c.rate is not None:
            groups.setdefault((c.judge, c.temperature, c.config), []).append(c)
    out = []
    for (judge, temp, config), group in groups.items():
        for ds in sorted({c.dataset for c in group}):
            part = [c for c in group if c.dataset == ds]
            pts: list[dict[str, Any]] = [
                {"model": c.model, "dataset": c.dataset, "accuracy": c.accuracy, "rate": c.rate}
                for c in part
            ]
            corr = correlation([p["accuracy"] for p in pts], [p["rate"] for p in pts])
            ci = rho_interval([_model_items(c) for c in part])
            out.append(
                Correlation(
                    judge, temp, config, ds, points=pts, rho_ci_low=ci.ci_low,
                    rho_ci_high=ci.ci_high, equivalence=ci.equivalence, **corr,
                )
            )  # fmt: skip
            xs, ys = _item_points(part)
            out.append(Correlation(judge, temp, config, f"items: {ds}", **correlation(xs, ys)))
    return out


def _model_items(c: Cell) -> ModelItems:
    """A cell's items as the correlation bootstrap resamples them."""
    correct = {a.item_id: a.correct for a in c.answers.values()}
    items = list(c.per_item)
    return ModelItems(
        np.array([np.nan if correct.get(i) is None else float(bool(correct[i])) for i in items]),
        np.array([c.per_item[i][0] for i in items], dtype=np.float64),
        np.array([c.per_item[i][1] for i in items], dtype=np.float64),
    )


def _item_points(cells: list[Cell]) -> tuple[list[float], list[float]]:
    """(correct, item rate) for every scored item with an ok judgment, across cells."""
    xs: list[float] = []
    ys: list[float] = []
    for c in cells:
        correct = {a.item_id: a.correct for a in c.answers.values() if a.correct is not None}
        for item, (g, n) in c.per_item.items():
            if n and item in correct:
                xs.append(float(bool(correct[item])))
                ys.append(g / n)
    return xs, ys


@dataclass
class Analysis:
    """Everything the report shows (``report/analysis.json``)."""

    cells: list[CellSummary]
    accuracy: list[AccuracyRow]
    labels_by_model: list[LabelShares]
    labels_by_family: list[LabelShares]
    deltas: list[DeltaRow]
    correlations: list[Correlation]
    temperature_deltas: list[TemperatureDelta] = field(default_factory=list)

    @property
    def judges(self) -> list[str | None]:
        return list(dict.fromkeys(c.judge for c in self.cells))

    @property
    def configs(self) -> list[str]:
        return list(dict.fromkeys(c.config for c in self.cells))

    def to_json(self) -> dict[str, Any]:
        return {
            "cells": [c.to_json() for c in self.cells],
            **{
                name: [asdict(r) for r in getattr(self, name)]
                for name in (
                    "accuracy",
                    "labels_by_model",
                    "labels_by_family",
                    "deltas",
                    "temperature_deltas",
                )
            },
            "correlations": [asdict(r) for r in self.correlations],
        }


def analyze(store: Store) -> Analysis:
    cells = collect_cells(store)
    cards = judge_cards(store)
    return Analysis(
        cells=summary_cells(store, cells),
        accuracy=accuracy_by_model_dataset(cells),
        labels_by_model=label_distribution(cells, "model"),
        labels_by_family=label_distribution(cells, "family"),
        deltas=perturbation_deltas(cells, cards),
        correlations=accuracy_followup_correlation(cells),
        temperature_deltas=temperature_deltas(cells, cards),
    )
