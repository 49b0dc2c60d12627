"""Agreement between two sets of judgments: two label files, two judges in one run, or
one judge across two runs.

What it reports (the paper's judge-validation table, D.1):
- ``n`` and the agreement on σ (genuine follow-up), as a fraction;
- Cohen's κ on σ from scikit-learn, with a 95% CI over ids that does not collapse on
  small n (a percentile bootstrap joined with a Wilson floor: :func:`kappa_interval`);
- primary-label agreement and κ, and both confusion matrices (rows A, columns B);
- per-cell genuine rates of each side, and their Pearson and Spearman correlations
  (scipy), when the rows carry a cell (``cell`` in exported label files, or the run's
  (model, dataset, T, perturbation)). Each side's rate uses all of its own ok rows in the
  cell, so two runs with different user turns can still be compared cell by cell;
- the disagreement slice: matched ids where σ or the label differ.

Rows that are not ``ok`` on either side, and ids present on one side only, are dropped
and counted (``dropped``, with the breakdown in ``dropped_detail``); they never count as
agreement or disagreement.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from userturn.datasets.base import read_jsonl
from userturn.errors import UserError
from userturn.stats import kappa, wilson
from userturn.types import CONVERSATION_PROBES, LABELS

if TYPE_CHECKING:
    from userturn.rundir.records import UserTurnRecord

BOOTSTRAP_REPS = 1000


@dataclass(frozen=True)
class LabelRow:
    id: str
    genuine: bool | None
    label: str | None
    status: str
    rationale: str = ""
    cell: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Context kept for the disagreement slice (``messages``, ``user_turn``)."""

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.genuine is not None and self.label is not None


def row_from_json(
    obj: dict[str, Any], where: str, line: int | None, cell_key: str | None = "cell"
) -> LabelRow:
    """One label-file line (``{"id", "genuine_followup", "label", "rationale", "status"}``)."""
    if "id" not in obj:
        raise UserError("missing", file=where, line=line, field="id")
    genuine = obj.get("genuine_followup")
    if genuine is not None and not isinstance(genuine, bool):
        raise UserError(
            "expected true, false or null", file=where, line=line, field="genuine_followup"
        )
    status = str(obj.get("status", "ok"))
    if status not in ("ok", "unparseable", "error"):
        raise UserError(f"unknown status {status!r}", file=where, line=line, field="status")
    label = obj.get("label")
    if status == "ok" and label is not None and label not in LABELS:
        raise UserError(
            f"label {label!r} is not one of the 8", file=where, line=line, field="label"
        )
    known = status == "ok" and genuine is not None and label not in (None, "other")
    if known and genuine != (label == "plausible_followup"):
        raise UserError(
            f"label {label!r} contradicts genuine_followup {str(genuine).lower()} "
            "(only plausible_followup is genuine; other may go either way)",
            file=where,
            line=line,
            field="label",
        )
    cell = obj.get(cell_key) if cell_key else None
    return LabelRow(
        str(obj["id"]),
        genuine,
        label,
        status,
        str(obj.get("rationale") or ""),
        None if cell is None else str(cell),
        {k: obj[k] for k in ("messages", "user_turn") if k in obj},
    )


def read_labels(path: Path, cell_key: str | None = "cell") -> dict[str, LabelRow]:
    rows: dict[str, LabelRow] = {}
    for line, obj in read_jsonl(path):
        row = row_from_json(obj, str(path), line, cell_key)
        if row.id in rows:
            raise UserError(f"duplicate id {row.id!r}", file=str(path), line=line, field="id")
        rows[row.id] = row
    return rows


def bootstrap_kappa(
    a: list[bool], b: list[bool], reps: int = BOOTSTRAP_REPS, seed: int = 0
) -> tuple[float | None, float | None]:
    """Percentile 95% CI of κ over ids resampled with replacement (undefined draws skipped)."""
    if len(a) < 2 or reps <= 0:
        return None, None
    rng = np.random.default_rng(seed)
    xa, xb = np.asarray(a), np.asarray(b)
    draws = []
    for _ in range(reps):
        idx = rng.integers(0, len(a), len(a))
        k = kappa(xa[idx], xb[idx], labels=[False, True])
        if k is not None:
            draws.append(k)
    if not draws:
        return None, None
    return float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))


KAPPA_CI_METHOD = "bootstrap+wilson-floor"


def kappa_interval(
    a: list[bool], b: list[bool], reps: int = BOOTSTRAP_REPS, seed: int = 0
) -> tuple[float | None, float | None]:
    """95% CI of κ that does not collapse on small n.

    The percentile bootstrap alone says κ 1.000 [1.000, 1.000] on three matched ids
    that agree: every resample agrees too. So the interval is the union of that
    bootstrap and a closed-form floor: the Wilson interval of the observed agreement
    p_o, mapped to κ = (p_o - p_e) / (1 - p_e) with the chance agreement p_e held at its
    observed value (``bootstrap+wilson-floor``). None where κ is undefined."""
    n = len(a)
    if n < 2 or reps <= 0:
        return None, None
    pa, pb = sum(a) / n, sum(b) / n
    p_e = pa * pb + (1 - pa) * (1 - pb)
    lo, hi = bootstrap_kappa(a, b, reps, seed)
    if p_e >= 1.0:
        return lo, hi
    w_lo, w_hi = wilson(sum(x == y for x, y in zip(a, b, strict=True)), n)
    assert w_lo is not None and w_hi is not None
    f_lo = max(-1.0, (w_lo - p_e) / (1 - p_e))
    f_hi = min(1.0, (w_hi - p_e) / (1 - p_e))
    return (f_lo if lo is None else min(lo, f_lo)), (f_hi if hi is None else max(hi, f_hi))


def _matrix(a: list[Any], b: list[Any], labels: list[Any]) -> list[list[int]]:
    from sklearn.metrics import confusion_matrix

    with warnings.catch_warnings():  # one label on both sides is a fine 1x1 matrix
        warnings.simplefilter("ignore")
        return [[int(x) for x in row] for row in confusion_matrix(a, b, labels=labels)]


def _corr(xs: list[float], ys: list[float]) -> dict[str, float | None]:
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return {}  # undefined: too few cells, or a constant rate
    from scipy import stats

    res = stats.pearsonr(xs, ys), stats.spearmanr(xs, ys)
    return {
        "pearson": float(res[0][0]),
        "pearson_p": float(res[0][1]),
        "spearman": float(res[1][0]),
        "spearman_p": float(res[1][1]),
    }


def cell_rates(a: dict[str, LabelRow], b: dict[str, LabelRow]) -> dict[str, Any] | None:
    """Per-cell genuine rates of each side and their correlations; None without cells."""
    per: dict[str, list[list[int]]] = defaultdict(lambda: [[0, 0], [0, 0]])
    for side, rows in enumerate((a, b)):
        for row in rows.values():
            if row.cell is not None and row.ok:
                per[row.cell][side][0] += int(bool(row.genuine))
                per[row.cell][side][1] += 1
    kept = [(c, v) for c, v in sorted(per.items()) if v[0][1] and v[1][1]]
    if not kept:
        return None
    ra = [v[0][0] / v[0][1] for _, v in kept]
    rb = [v[1][0] / v[1][1] for _, v in kept]
    cells = [
        {"cell": c, "n_a": v[0][1], "n_b": v[1][1], "rate_a": x, "rate_b": y}
        for (c, v), x, y in zip(kept, ra, rb, strict=True)
    ]
    corr = _corr(ra, rb)
    return {
        "cells": cells,
        "pearson": corr.get("pearson"),
        "spearman": corr.get("spearman"),
        "pearson_p": corr.get("pearson_p"),
        "spearman_p": corr.get("spearman_p"),
    }


def _split(a: dict[str, LabelRow], b: dict[str, LabelRow]) -> tuple[list[str], dict[str, int]]:
    both = [i for i in a if i in b]
    ok = [i for i in both if a[i].ok and b[i].ok]
    detail = {
        "not_ok": len(both) - len(ok),
        "not_ok_a": sum(1 for i in both if not a[i].ok),
        "not_ok_b": sum(1 for i in both if not b[i].ok),
        "only_in_a": len(a) - len(both),
        "only_in_b": sum(1 for i in b if i not in a),
    }
    return ok, detail


def agreement(
    a: dict[str, LabelRow], b: dict[str, LabelRow], *, reps: int = BOOTSTRAP_REPS, seed: int = 0
) -> dict[str, Any]:
    """The full comparison of A and B (keys: see the module docstring)."""
    ids, detail = _split(a, b)
    ga, gb = [bool(a[i].genuine) for i in ids], [bool(b[i].genuine) for i in ids]
    la, lb = [str(a[i].label) for i in ids], [str(b[i].label) for i in ids]
    labels = [lab for lab in LABELS if lab in set(la) | set(lb)]
    n = len(ids)
    return {
        "n": n,
        "dropped": detail["not_ok"] + detail["only_in_a"] + detail["only_in_b"],
        "dropped_detail": detail,
        "agreement": sum(x == y for x, y in zip(ga, gb, strict=True)) / n if n else None,
        "kappa": kappa(ga, gb, labels=[False, True]) if n else None,
        "kappa_ci": list(kappa_interval(ga, gb, reps, seed)),
        "kappa_ci_method": KAPPA_CI_METHOD,
        "rate_a": sum(ga) / n if n else None,
        "rate_b": sum(gb) / n if n else None,
        "label_agreement": sum(x == y for x, y in zip(la, lb, strict=True)) / n if n else None,
        "label_kappa": kappa(la, lb, labels=labels) if n else None,
        "confusion": {
            "rows": "A",
            "columns": "B",
            "labels": ["genuine", "not_genuine"],
            "matrix": _matrix(ga, gb, [True, False]) if n else [[0, 0], [0, 0]],
        },
        "label_confusion": {"labels": labels, "matrix": _matrix(la, lb, labels) if n else []},
        "per_cell": cell_rates(a, b),
        "disagreements": sum(1 for i in ids if a[i].genuine != b[i].genuine),
    }


def disagreement_slice(a: dict[str, LabelRow], b: dict[str, LabelRow]) -> list[dict[str, Any]]:
    """Matched ok ids where σ or the label differ, with both verdicts and any context."""
    ids, _ = _split(a, b)
    out = []
    for i in ids:
        ra, rb = a[i], b[i]
        if ra.genuine == rb.genuine and ra.label == rb.label:
            continue
        side = {
            k: {"genuine_followup": r.genuine, "label": r.label, "rationale": r.rationale}
            for k, r in (("a", ra), ("b", rb))
        }
        out.append(
            {
                "id": i,
                "sigma_differs": ra.genuine != rb.genuine,
                **side,
                **(ra.extra or rb.extra),
                **({"cell": ra.cell} if ra.cell else {}),
            }
        )
    return out


def resolve_judge(raw: str, available: list[str]) -> str:
    """The stored judge id for a spec as the user typed it (``openai:m`` is
    ``llm:openai:m``; transport options such as ``base_url`` are not part of ids)."""
    from userturn.judges import normalize_judge_spec

    norm = normalize_judge_spec(raw)
    candidates = [raw, norm]
    kind, _, target = norm.partition(":")
    if kind in ("llm", "cascade") and target:
        from userturn.judges.llm import canonical_id

        candidates.append(canonical_id(kind, target.removeprefix("llm:")))
    for c in candidates:
        if c in available:
            return c
    raise UserError(
        f"no judgments by {raw!r} in this run (judges: {', '.join(available) or 'none'})",
        field="judge",
    )


def run_labels(run_dir: Path, judge: str) -> dict[str, LabelRow]:
    """One judge's verdicts on a run's user turns, keyed by user-turn id, with cells."""
    from userturn.rundir.store import open_run

    with open_run(run_dir) as store:
        judge_id = resolve_judge(judge, store.judges())
        verdicts = {k: j for k, js in store.judgments().items() for j in js if j.judge == judge_id}
        rows = {}
        for turn in store.user_turns():
            v = verdicts.get(turn.key)
            if v is None:
                continue
            rows[turn.key] = LabelRow(
                turn.key,
                v.genuine if v.status == "ok" else None,
                v.label if v.status == "ok" else None,
                v.status,
                v.rationale,
                cell_name(turn),
                {"messages": list(turn.messages), "user_turn": turn.user_turn},
            )
        return rows


def cell_name(turn: UserTurnRecord) -> str:
    """The cell a user turn belongs to, as one string (``cell`` in label files)."""
    parts = [turn.model, turn.dataset, f"T={turn.temperature}", turn.perturbation]
    if turn.config:
        parts.append(f"config={turn.config}")
    if turn.probe in CONVERSATION_PROBES:  # turn t is its own cell, as in summary.json
        parts.append(f"{turn.probe}={turn.turn}")
    return "|".join(parts)
