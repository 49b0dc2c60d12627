"""Statistics of the judge-free measures: per-context contrasts and paired item deltas.

Every interval resamples the unit the values are independent over: contexts for the
likelihood probe (one value per context), items for the error-injection control (one
pair per item). Shares get Wilson intervals; means, differences and the AUC get
bootstrap intervals over those units (percentile, seeded, so a report is reproducible).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from userturn.analysis.intervals import CI, mean_interval, wilson

REPS = 2000


@dataclass(frozen=True)
class Estimate:
    """A value with its 95% interval (``low``/``high`` None when n is too small)."""

    value: float | None
    low: float | None = None
    high: float | None = None


def share_positive(values: Sequence[float]) -> Estimate:
    """The share of values above 0, with its Wilson interval."""
    if not values:
        return Estimate(None)
    k = sum(v > 0 for v in values)
    lo, hi = wilson(k, len(values))
    return Estimate(k / len(values), lo, hi)


def mean_of(values: Sequence[float]) -> Estimate:
    """The mean, with a bootstrap interval over the values."""
    if not values:
        return Estimate(None)
    lo, hi = mean_interval(list(values))
    return Estimate(float(np.mean(values)), lo, hi)


def _percentile(stats: np.ndarray) -> CI:
    ok = stats[np.isfinite(stats)]
    if ok.size == 0:
        return None, None
    return float(np.percentile(ok, 2.5)), float(np.percentile(ok, 97.5))


def paired_share_difference(a: Sequence[float], b: Sequence[float], seed: int = 0) -> Estimate:
    """share(a > 0) - share(b > 0) over paired values (same context), with a bootstrap
    interval that resamples the pairs together."""
    if not a or len(a) != len(b):
        return Estimate(None)
    d = np.asarray(a) > 0
    e = np.asarray(b) > 0
    diff = d.astype(float) - e.astype(float)
    if len(diff) < 2:
        return Estimate(float(diff.mean()))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(diff), size=(REPS, len(diff)))
    lo, hi = _percentile(diff[idx].mean(axis=1))
    return Estimate(float(diff.mean()), lo, hi)


def auc(pos: Sequence[float], neg: Sequence[float]) -> float | None:
    """P(pos > neg) + P(tie) / 2 (the Mann-Whitney AUC); None without both classes."""
    if not pos or not neg:
        return None
    from sklearn.metrics import roc_auc_score

    y = [1] * len(pos) + [0] * len(neg)
    return float(roc_auc_score(y, [*pos, *neg]))


def paired_auc(pos: Sequence[float], neg: Sequence[float], seed: int = 0) -> Estimate:
    """AUC of ``pos`` against ``neg`` where the i-th of each come from the same context;
    the bootstrap resamples contexts (both values of one context together)."""
    value = auc(pos, neg)
    if value is None or len(pos) != len(neg) or len(pos) < 2:
        return Estimate(value)
    p, n = np.asarray(pos), np.asarray(neg)
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(REPS):
        idx = rng.integers(0, len(p), size=len(p))
        stats.append(_fast_auc(p[idx], n[idx]))
    lo, hi = _percentile(np.asarray(stats))
    return Estimate(value, lo, hi)


def _fast_auc(p: np.ndarray, n: np.ndarray) -> float:
    greater = (p[:, None] > n[None, :]).mean()
    ties = (p[:, None] == n[None, :]).mean()
    return float(greater + ties / 2)


def paired_delta(treated: Sequence[float], base: Sequence[float], seed: int = 0) -> Estimate:
    """mean(treated - base) over pairs (one per item), with a bootstrap interval over
    items: the injection control's effect, each item its own baseline."""
    if not treated or len(treated) != len(base):
        return Estimate(None)
    d = np.asarray(treated, dtype=float) - np.asarray(base, dtype=float)
    if len(d) < 2:
        return Estimate(float(d.mean()))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(d), size=(REPS, len(d)))
    lo, hi = _percentile(d[idx].mean(axis=1))
    return Estimate(float(d.mean()), lo, hi)
