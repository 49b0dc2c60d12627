"""Aggregation: genuine-follow-up rates per cell, with honest intervals.

A cell is (model, dataset, temperature, perturbation, judge). The rate's denominator is
judgments with status ok; unparseable and errored judgments are counted beside it, never
folded into "not genuine". With one sample per context the interval is Wilson; with k > 1
samples per context they are correlated, so the interval is a cluster bootstrap that
resamples items, not turns.

Everything here is computed from the store with a few SQL queries that pull only the
columns aggregation needs (``json_extract`` in SQLite) rather than decoding every
record's JSON, so 100k records aggregate in seconds (bench/p6_aggregate.py). The
paper-level views (accuracy, label shares, perturbation deltas, accuracy-vs-follow-up
correlation) are built from the same :class:`Cell` objects, which keep per-item counts
so that every interval can resample items.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from userturn.store import Store

BOOTSTRAP_REPS = 2000
CI = tuple[float | None, float | None]
ItemCounts = list[tuple[int, int]]
"""Per item: (genuine, ok judgments)."""


# intervals ------------------------------------------------------------------------------
_Z95 = NormalDist().inv_cdf(0.975)


def wilson(k: int, n: int) -> CI:
    """Wilson score 95% interval, in closed form.

    The same numbers as ``statsmodels``' ``proportion_confint(method="wilson")`` (tested to
    1e-12 on every k of several n), written out because importing statsmodels (and the
    scipy.stats and pandas it pulls in) costs ~1.4 s, which was more than half of a
    zero-call re-run of a finished 1,000-record run (P4). The rarer intervals
    (Newcombe differences, correlations) still come from statsmodels and scipy.
    """
    if n == 0:
        return None, None
    z2 = _Z95 * _Z95
    p = k / n
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = _Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _percentile_ci(values: np.ndarray) -> CI:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return None, None
    lo, hi = np.percentile(finite, [2.5, 97.5])
    return float(lo), float(hi)


def _resampled_rates(g: np.ndarray, n: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Pooled rate sum(g)/sum(n) per bootstrap replicate; NaN where a replicate has no n."""
    num, den = g[idx].sum(axis=1), n[idx].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def cluster_bootstrap(per_item: ItemCounts, seed: int = 0, reps: int = BOOTSTRAP_REPS) -> CI:
    """95% percentile CI of sum(genuine)/sum(n), resampling items with replacement."""
    if not per_item:
        return None, None
    arr = np.asarray(per_item, dtype=np.float64)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(per_item), size=(reps, len(per_item)))
    return _percentile_ci(_resampled_rates(arr[:, 0], arr[:, 1], idx))


def paired_bootstrap_diff(
    a: ItemCounts, b: ItemCounts, seed: int = 0, reps: int = BOOTSTRAP_REPS
) -> CI:
    """CI of rate(a) - rate(b) where a[i] and b[i] are the same item (paired clusters).

    Resampling items jointly keeps the item effect (an easy item is easy under both
    conditions), which is what makes a perturbation delta tighter than two independent
    intervals would suggest.
    """
    if not a or len(a) != len(b):
        return None, None
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    idx = np.random.default_rng(seed).integers(0, len(a), size=(reps, len(a)))
    diff = _resampled_rates(x[:, 0], x[:, 1], idx) - _resampled_rates(y[:, 0], y[:, 1], idx)
    return _percentile_ci(diff)


def independent_bootstrap_diff(
    a: ItemCounts, b: ItemCounts, seed: int = 0, reps: int = BOOTSTRAP_REPS
) -> CI:
    """CI of rate(a) - rate(b) for unrelated item sets, each resampled by item."""
    if not a or not b:
        return None, None
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    rng = np.random.default_rng(seed)
    ia = rng.integers(0, len(a), size=(reps, len(a)))
    ib = rng.integers(0, len(b), size=(reps, len(b)))
    diff = _resampled_rates(x[:, 0], x[:, 1], ia) - _resampled_rates(y[:, 0], y[:, 1], ib)
    return _percentile_ci(diff)


def newcombe_diff(k1: int, n1: int, k2: int, n2: int) -> CI:
    """Newcombe's hybrid-score CI of p1 - p2 for independent proportions (one sample each)."""
    if n1 == 0 or n2 == 0:
        return None, None
    from statsmodels.stats.proportion import confint_proportions_2indep

    lo, hi = confint_proportions_2indep(k1, n1, k2, n2, method="newcomb", compare="diff")
    return float(lo), float(hi)


# cells ----------------------------------------------------------------------------------
@dataclass
class Answer:
    item_id: str
    correct: bool | None
    truncated: bool


@dataclass
class Cell:
    """One (model, dataset, T, perturbation, judge) cell, with per-item counts kept."""

    model: str
    dataset: str
    temperature: float | None
    perturbation: str
    judge: str | None
    family: str = ""
    n_total: int = 0
    genuine: int = 0
    n: int = 0
    unparseable: int = 0
    errors: int = 0
    labels: Counter[str] = field(default_factory=Counter)
    per_item: dict[str, list[int]] = field(default_factory=dict)
    answers: dict[str, Answer] = field(default_factory=dict)
    max_samples: int = 0

    @property
    def key(self) -> tuple[str, str, float | None, str, str | None]:
        return self.model, self.dataset, self.temperature, self.perturbation, self.judge

    def add(
        self,
        item_id: str,
        sample: int,
        answer_key: str,
        answer: Answer,
        judgment: tuple[Any, Any, Any] | None,
    ) -> None:
        """Count one user turn; ``judgment`` is (status, genuine, label) or None."""
        self.n_total += 1
        self.max_samples = max(self.max_samples, sample + 1)
        self.answers[answer_key] = answer
        counts = self.per_item.setdefault(item_id, [0, 0])
        if judgment is None:
            return
        status, genuine, label = judgment
        if status == "ok":
            self.n += 1
            self.genuine += int(bool(genuine))
            self.labels[str(label)] += 1
            counts[0] += int(bool(genuine))
            counts[1] += 1
        elif status == "unparseable":
            self.unparseable += 1
        else:
            self.errors += 1

    def item_counts(self, items: Iterable[str] | None = None) -> ItemCounts:
        keys = self.per_item if items is None else items
        return [(self.per_item[i][0], self.per_item[i][1]) for i in keys]

    @property
    def rate(self) -> float | None:
        return self.genuine / self.n if self.n else None

    @property
    def accuracy(self) -> float | None:
        scored = [a.correct for a in self.answers.values() if a.correct is not None]
        return sum(scored) / len(scored) if scored else None

    def ci(self) -> tuple[CI, str]:
        if self.max_samples > 1:
            return cluster_bootstrap(self.item_counts()), "cluster-bootstrap"
        return wilson(self.genuine, self.n), "wilson"

    def to_json(self) -> dict[str, Any]:
        (lo, hi), method = self.ci()
        return {
            "model": self.model,
            "dataset": self.dataset,
            "temperature": self.temperature,
            "perturbation": self.perturbation,
            "judge": self.judge,
            "family": self.family,
            "n_total": self.n_total,
            "n": self.n,
            "genuine": self.genuine,
            "rate": self.rate,
            "ci_low": lo,
            "ci_high": hi,
            "ci_method": method,
            "samples": self.max_samples,
            "n_items": len(self.per_item),
            "unparseable": self.unparseable,
            "errors": self.errors,
            "accuracy": self.accuracy,
            "n_answers": len(self.answers),
            "answers_truncated": sum(1 for a in self.answers.values() if a.truncated),
            "labels": dict(sorted(self.labels.items(), key=lambda kv: (-kv[1], kv[0]))),
        }


_TURNS_SQL = """
SELECT u.key, u.item_id, u.model, u.dataset, u.temperature, u.sample, u.perturbation,
       json_extract(u.data, '$.family'), u.answer_key,
       json_extract(a.data, '$.correct'), json_extract(a.data, '$.finish')
FROM user_turns u LEFT JOIN answers a ON a.key = u.answer_key ORDER BY u.rowid
"""
_JUDGMENTS_SQL = """
SELECT user_turn_key, judge, json_extract(data, '$.status'),
       json_extract(data, '$.genuine_followup'), json_extract(data, '$.label')
FROM judgments
"""


def _judgment_index(store: Store) -> dict[str, dict[str, tuple[Any, Any, Any]]]:
    out: dict[str, dict[str, tuple[Any, Any, Any]]] = {}
    for key, judge, status, genuine, label in store.conn.execute(_JUDGMENTS_SQL):
        out.setdefault(key, {})[judge] = (status, genuine, label)
    return out


def collect_cells(store: Store) -> list[Cell]:
    """Every cell in the store, in report order, with per-item counts for resampling.

    A user turn that a judge has not (yet) judged counts in that judge's ``n_total`` but
    not in its ``n``, so partially judged runs show the gap instead of hiding it.
    """
    judged = _judgment_index(store)
    judges: list[str | None] = list(store.judges()) or [None]
    cells: dict[tuple[Any, ...], Cell] = {}
    for (
        key,
        item,
        model,
        dataset,
        temp,
        sample,
        pert,
        family,
        akey,
        correct,
        finish,
    ) in store.conn.execute(_TURNS_SQL):
        answer = Answer(item, None if correct is None else bool(correct), finish == "length")
        by_judge = judged.get(key, {})
        for judge in judges:
            ck = (model, dataset, temp, pert, judge)
            cell = cells.get(ck)
            if cell is None:
                cell = cells[ck] = Cell(*ck, family=str(family or ""))
            cell.add(item, sample, akey, answer, by_judge.get(judge) if judge else None)
    return sorted(cells.values(), key=_cell_order)


def summary_cells(store: Store) -> list[dict[str, Any]]:
    """One cell per (model, dataset, T, perturbation, judge) over the whole store."""
    return [c.to_json() for c in collect_cells(store)]


def _cell_order(c: Cell) -> tuple[Any, ...]:
    return (
        c.model,
        c.dataset,
        c.perturbation != "none",
        c.perturbation,
        c.temperature if c.temperature is not None else -1,
        c.judge or "",
    )


def top_labels(labels: dict[str, int], k: int = 2, exclude: Iterable[str] = ()) -> str:
    total = sum(labels.values())
    skip = set(exclude)
    items = sorted(
        ((lab, n) for lab, n in labels.items() if lab not in skip), key=lambda kv: (-kv[1], kv[0])
    )
    return ", ".join(f"{lab} {n / total:.0%}" for lab, n in items[:k]) if total else ""


# paper-level views ------------------------------------------------------------------------
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
