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

from userturn.analysis.cells import Answer, Cell, collect_cells, summary_cells
from userturn.analysis.intervals import ItemCounts, paired_diff_interval, wilson
from userturn.run.records import CellSummary
from userturn.run.store import Store


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


def perturbation_deltas(cells: Iterable[Cell]) -> list[DeltaRow]:
    """Rate with each perturbation minus the rate without it, per (model, dataset, config,
    T, judge).

    The two conditions share items (the same answers, perturbed or not), so the interval
    is a paired cluster bootstrap over the items present in both cells, and the point
    estimate is computed on those same items.
    """
    cells = list(cells)
    base = {_delta_key(c): c for c in cells if c.perturbation == "none"}
    out = []
    for c in cells:
        ref = base.get(_delta_key(c))
        if c.perturbation == "none" or ref is None:
            continue
        shared = sorted(set(c.per_item) & set(ref.per_item))
        a, b = c.item_counts(shared), ref.item_counts(shared)
        ra, rb = _pooled(a), _pooled(b)
        (lo, hi), method = paired_diff_interval(a, b)
        out.append(
            DeltaRow(
                model=c.model,
                family=c.family,
                dataset=c.dataset,
                config=c.config,
                temperature=c.temperature,
                judge=c.judge,
                perturbation=c.perturbation,
                n_items=len(shared),
                n=c.n,
                n_base=ref.n,
                rate=ra,
                rate_base=rb,
                delta=None if ra is None or rb is None else ra - rb,
                ci_low=lo,
                ci_high=hi,
                ci_method=method,
                unparseable=c.unparseable + c.errors,
                unparseable_base=ref.unparseable + ref.errors,
                **_challenges(c, ref),
            )
        )
    return out


def _challenges(c: Cell, ref: Cell) -> dict[str, float | None]:
    """How often turns dispute the answer, perturbed vs not (``inject-error``'s point: an
    aware model challenges a wrong answer more often than a right one)."""
    a = c.challenges / c.challenge_n if c.challenge_n else None
    b = ref.challenges / ref.challenge_n if ref.challenge_n else None
    return {
        "challenge_rate": a,
        "challenge_rate_base": b,
        "challenge_delta": None if a is None or b is None else a - b,
    }


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

    Points are (model, dataset) pairs with both an accuracy and a rate, perturbation
    ``none``; one row per (judge, T) pooling datasets, and one per dataset when it has
    points from several models. A last row per (judge, T), scope ``items``, asks the
    same question within models: item correctness (0/1) against the item's follow-up
    rate (a point-biserial r), which stays defined when a grid has only two models.
    """
    groups: dict[tuple[str | None, float | None, str], list[Cell]] = {}
    for c in cells:
        if c.perturbation == "none" and c.accuracy is not None and c.rate is not None:
            groups.setdefault((c.judge, c.temperature, c.config), []).append(c)
    out = []
    for (judge, temp, config), group in groups.items():
        points: list[dict[str, Any]] = [
            {"model": c.model, "dataset": c.dataset, "accuracy": c.accuracy, "rate": c.rate}
            for c in group
        ]
        scopes = {"all datasets": points}
        for ds in sorted({p["dataset"] for p in points}):
            scopes[ds] = [p for p in points if p["dataset"] == ds]
        for scope, pts in scopes.items():
            corr = correlation([p["accuracy"] for p in pts], [p["rate"] for p in pts])
            out.append(Correlation(judge, temp, config, scope, points=pts, **corr))
        xs, ys = _item_points(group)
        out.append(Correlation(judge, temp, config, "items", **correlation(xs, ys)))
    return out


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
                for name in ("accuracy", "labels_by_model", "labels_by_family", "deltas")
            },
            "correlations": [asdict(r) for r in self.correlations],
        }


def analyze(store: Store) -> Analysis:
    cells = collect_cells(store)
    return Analysis(
        cells=summary_cells(store, cells),
        accuracy=accuracy_by_model_dataset(cells),
        labels_by_model=label_distribution(cells, "model"),
        labels_by_family=label_distribution(cells, "family"),
        deltas=perturbation_deltas(cells),
        correlations=accuracy_followup_correlation(cells),
    )
