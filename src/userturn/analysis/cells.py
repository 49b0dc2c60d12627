"""Cells: the genuine-follow-up rate per (model, dataset, T, perturbation, judge).

The rate's denominator is judgments with status ok; unparseable and errored judgments
are counted beside it, never folded into "not genuine". With one sample per context the
interval is Wilson; with k > 1 samples per context they are correlated, so the interval
is a cluster bootstrap that resamples items, not turns. Cells keep per-item counts so
that every later view (deltas, comparisons) can resample items too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from userturn.analysis.intervals import CI, ItemCounts, cluster_bootstrap, wilson
from userturn.store import Store


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
