"""Aggregation: genuine-follow-up rates per cell, with honest intervals.

A cell is (model, dataset, temperature, perturbation, judge). The rate's denominator is
judgments with status ok; unparseable and errored judgments are counted beside it, never
folded into "not genuine". With one sample per context the interval is Wilson; with k > 1
samples per context they are correlated, so the interval is a cluster bootstrap that
resamples items, not turns.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from statsmodels.stats.proportion import proportion_confint

from userturn.store import Store

BOOTSTRAP_REPS = 2000


def wilson(k: int, n: int) -> tuple[float | None, float | None]:
    if n == 0:
        return None, None
    lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
    return float(lo), float(hi)


def cluster_bootstrap(per_item: list[tuple[int, int]], seed: int = 0,
                      reps: int = BOOTSTRAP_REPS) -> tuple[float | None, float | None]:
    """95% percentile CI of sum(genuine)/sum(n), resampling items with replacement."""
    if not per_item:
        return None, None
    g = np.array([x[0] for x in per_item], dtype=np.float64)
    n = np.array([x[1] for x in per_item], dtype=np.float64)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(per_item), size=(reps, len(per_item)))
    num, den = g[idx].sum(axis=1), n[idx].sum(axis=1)
    rates = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
    lo, hi = np.percentile(rates, [2.5, 97.5])
    return float(lo), float(hi)


@dataclass
class Cell:
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
    per_item: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    answers: dict[str, tuple[bool | None, bool]] = field(default_factory=dict)
    max_samples: int = 0

    def add(self, item_id: str, sample: int, answer_key: str, answer: dict[str, Any],
            judgment: dict[str, Any] | None) -> None:
        self.n_total += 1
        self.max_samples = max(self.max_samples, sample + 1)
        self.answers[answer_key] = (answer.get("correct"), answer.get("finish") == "length")
        if judgment is None:
            return
        status = judgment.get("status")
        if status == "ok":
            self.n += 1
            genuine = bool(judgment.get("genuine_followup"))
            self.genuine += int(genuine)
            self.labels[str(judgment.get("label"))] += 1
            self.per_item[item_id][0] += int(genuine)
            self.per_item[item_id][1] += 1
        elif status == "unparseable":
            self.unparseable += 1
        else:
            self.errors += 1

    def to_json(self) -> dict[str, Any]:
        scored = [c for c, _ in self.answers.values() if c is not None]
        if self.max_samples > 1:
            lo, hi = cluster_bootstrap([(g, n) for g, n in self.per_item.values()])
        else:
            lo, hi = wilson(self.genuine, self.n)
        return {
            "model": self.model, "dataset": self.dataset, "temperature": self.temperature,
            "perturbation": self.perturbation, "judge": self.judge, "family": self.family,
            "n_total": self.n_total, "n": self.n, "genuine": self.genuine,
            "rate": self.genuine / self.n if self.n else None, "ci_low": lo, "ci_high": hi,
            "ci_method": "cluster-bootstrap" if self.max_samples > 1 else "wilson",
            "unparseable": self.unparseable, "errors": self.errors,
            "accuracy": sum(scored) / len(scored) if scored else None,
            "n_answers": len(self.answers),
            "answers_truncated": sum(1 for _, t in self.answers.values() if t),
            "labels": dict(sorted(self.labels.items(), key=lambda kv: -kv[1])),
        }


def summary_cells(store: Store) -> list[dict[str, Any]]:
    """One cell per (model, dataset, T, perturbation, judge) over the whole store."""
    answers = dict(store.answers())
    judgments = store.judgments()
    judges: list[str | None] = list(store.judges()) or [None]
    cells: dict[tuple[Any, ...], Cell] = {}
    for row in store.user_turns():
        by_judge = {j["judge"]: j for j in judgments.get(row.key, [])}
        for judge in judges:
            key = (row.model, row.dataset, row.temperature, row.perturbation, judge)
            cell = cells.get(key)
            if cell is None:
                cell = cells[key] = Cell(*key, family=str(row.data.get("family", "")))
            cell.add(row.item_id, row.sample, row.answer_key, answers.get(row.answer_key, {}),
                     by_judge.get(judge) if judge else None)
    ordered = sorted(cells.values(), key=_cell_order)
    return [c.to_json() for c in ordered]


def _cell_order(c: Cell) -> tuple[Any, ...]:
    return (c.model, c.dataset, c.perturbation != "none", c.perturbation,
            c.temperature if c.temperature is not None else -1, c.judge or "")


def top_labels(labels: dict[str, int], k: int = 2, exclude: Iterable[str] = ()) -> str:
    total = sum(labels.values())
    items = [(lab, n) for lab, n in labels.items() if lab not in set(exclude)]
    return ", ".join(f"{lab} {n / total:.0%}" for lab, n in items[:k]) if total else ""
