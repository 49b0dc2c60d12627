"""The paper-level views built from cells: accuracy, label shares, perturbation deltas
and the accuracy-vs-follow-up correlation, plus ``analyze`` which gathers them all for
the report."""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from userturn.analysis.cells import Answer, Cell, collect_cells
from userturn.analysis.intervals import ItemCounts, paired_bootstrap_diff, wilson
from userturn.store import Store


def accuracy_by_model_dataset(cells: Iterable[Cell]) -> list[dict[str, Any]]:
    """Task accuracy per (model, dataset) over distinct answers, with a Wilson CI.

    Answers are shared by every temperature, sample, perturbation and judge, so they are
    deduplicated by answer key before counting.
    """
    groups: dict[tuple[str, str], tuple[str, dict[str, Answer]]] = {}
    for c in cells:
        fam, answers = groups.setdefault((c.model, c.dataset), (c.family, {}))
        answers.update(c.answers)
    out = []
    for (model, dataset), (fam, answers) in groups.items():
        scored = [a.correct for a in answers.values() if a.correct is not None]
        k = sum(1 for s in scored if s)
        lo, hi = wilson(k, len(scored)) if scored else (None, None)
        out.append(
            {
                "model": model,
                "family": fam,
                "dataset": dataset,
                "n_answers": len(answers),
                "n_scored": len(scored),
                "correct": k,
                "accuracy": k / len(scored) if scored else None,
                "ci_low": lo,
                "ci_high": hi,
                "answers_truncated": sum(1 for a in answers.values() if a.truncated),
            }
        )
    return out


def label_distribution(cells: Iterable[Cell], by: str = "model") -> list[dict[str, Any]]:
    """Label counts and shares (of ok judgments) per judge and per model or family."""
    if by not in ("model", "family"):
        raise ValueError(f"by must be 'model' or 'family', got {by!r}")
    groups: dict[tuple[str | None, str], dict[str, Any]] = {}
    for c in cells:
        name = c.model if by == "model" else c.family
        g = groups.setdefault(
            (c.judge, name),
            {"labels": Counter(), "n": 0, "n_total": 0, "unparseable": 0, "errors": 0},
        )
        g["labels"].update(c.labels)
        for k in ("n", "n_total", "unparseable", "errors"):
            g[k] += getattr(c, k)
    out = []
    for (judge, name), g in groups.items():
        labels: Counter[str] = g.pop("labels")
        shares = {lab: cnt / g["n"] for lab, cnt in labels.items()} if g["n"] else {}
        out.append(
            {
                by: name,
                "judge": judge,
                **g,
                "labels": dict(sorted(labels.items(), key=lambda kv: (-kv[1], kv[0]))),
                "shares": dict(sorted(shares.items(), key=lambda kv: (-kv[1], kv[0]))),
            }
        )
    return out


def perturbation_deltas(cells: Iterable[Cell]) -> list[dict[str, Any]]:
    """Rate with each perturbation minus the rate without it, per (model, dataset, T, judge).

    The two conditions share items (the same answers, perturbed or not), so the interval
    is a paired cluster bootstrap over the items present in both cells, and the point
    estimate is computed on those same items.
    """
    cells = list(cells)
    base = {
        (c.model, c.dataset, c.temperature, c.judge): c for c in cells if c.perturbation == "none"
    }
    out = []
    for c in cells:
        ref = base.get((c.model, c.dataset, c.temperature, c.judge))
        if c.perturbation == "none" or ref is None:
            continue
        shared = sorted(set(c.per_item) & set(ref.per_item))
        a, b = c.item_counts(shared), ref.item_counts(shared)
        ra, rb = _pooled(a), _pooled(b)
        lo, hi = paired_bootstrap_diff(a, b)
        out.append(
            {
                "model": c.model,
                "family": c.family,
                "dataset": c.dataset,
                "temperature": c.temperature,
                "judge": c.judge,
                "perturbation": c.perturbation,
                "n_items": len(shared),
                "n": c.n,
                "n_base": ref.n,
                "rate": ra,
                "rate_base": rb,
                "delta": None if ra is None or rb is None else ra - rb,
                "ci_low": lo,
                "ci_high": hi,
                "ci_method": "paired-cluster-bootstrap",
                "unparseable": c.unparseable + c.errors,
                "unparseable_base": ref.unparseable + ref.errors,
            }
        )
    return out


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


def accuracy_followup_correlation(cells: Iterable[Cell]) -> list[dict[str, Any]]:
    """Across models: does task accuracy predict the follow-up rate? (The paper: no.)

    Points are (model, dataset) pairs with both an accuracy and a rate, perturbation
    ``none``; one row per (judge, T) pooling datasets, and one per dataset when it has
    points from several models. A last row per (judge, T), scope ``items``, asks the
    same question within models: item correctness (0/1) against the item's follow-up
    rate (a point-biserial r), which stays defined when a grid has only two models.
    """
    groups: dict[tuple[str | None, float | None], list[Cell]] = {}
    for c in cells:
        if c.perturbation == "none" and c.accuracy is not None and c.rate is not None:
            groups.setdefault((c.judge, c.temperature), []).append(c)
    out = []
    for (judge, temp), group in groups.items():
        points: list[dict[str, Any]] = [
            {"model": c.model, "dataset": c.dataset, "accuracy": c.accuracy, "rate": c.rate}
            for c in group
        ]
        scopes = {"all datasets": points}
        for ds in sorted({p["dataset"] for p in points}):
            scopes[ds] = [p for p in points if p["dataset"] == ds]
        for scope, pts in scopes.items():
            corr = correlation([p["accuracy"] for p in pts], [p["rate"] for p in pts])
            out.append({"judge": judge, "temperature": temp, "scope": scope, "points": pts, **corr})
        xs, ys = _item_points(group)
        out.append(
            {
                "judge": judge,
                "temperature": temp,
                "scope": "items",
                "points": [],
                **correlation(xs, ys),
            }
        )
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
    """Everything the report shows, as JSON-ready rows (``report/analysis.json``)."""

    cells: list[dict[str, Any]]
    accuracy: list[dict[str, Any]]
    labels_by_model: list[dict[str, Any]]
    labels_by_family: list[dict[str, Any]]
    deltas: list[dict[str, Any]]
    correlations: list[dict[str, Any]]

    @property
    def judges(self) -> list[str | None]:
        return list(dict.fromkeys(c["judge"] for c in self.cells))

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def analyze(store: Store) -> Analysis:
    cells = collect_cells(store)
    return Analysis(
        cells=[c.to_json() for c in cells],
        accuracy=accuracy_by_model_dataset(cells),
        labels_by_model=label_distribution(cells, "model"),
        labels_by_family=label_distribution(cells, "family"),
        deltas=perturbation_deltas(cells),
        correlations=accuracy_followup_correlation(cells),
    )
