"""Intervals on the paper's claims: accuracy vs follow-up, temperature, perturbations.

Why: a claim such as "accuracy is decoupled from the follow-up rate" is a statement
about a population of models and items, and a p-value on a handful of points says
nothing about how large a correlation the data rule out. Each claim here gets an
interval that resamples what the claim generalises over:

- accuracy vs follow-up, per dataset (pooling datasets confounds dataset with model):
  Spearman's ρ across models with a two-level bootstrap (models with replacement, then
  each chosen model's items with replacement), and an equivalence statement by two
  one-sided tests at 5%: "|ρ| < 0.3 with 95% confidence" when the 90% percentile
  interval lies inside (-0.3, 0.3), else "not shown";
- T vs T=0 and perturbed vs unperturbed: paired by item (the same answers), raw and
  judge-corrected. Both sides of a pair share dataset, model and judge, so they share the
  judge's error rates, and the corrected difference is the raw one over Youden's J =
  se + sp - 1 (Rogan–Gladen's specificity term cancels). Its interval is the percentile
  interval of paired item-bootstrap differences over J draws, joined with the raw
  interval scaled by J's 2.5th and 97.5th percentiles, so that it never collapses when
  every item is 0 on both sides.

A bootstrap replicate where ρ is undefined (fewer than three distinct models drawn, or a
constant side) or J ≤ 0 counts as -1 for the lower bound and +1 for the upper: it says
any value is possible.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from userturn.analysis.intervals import BOOTSTRAP_REPS, ItemCounts

EQUIVALENCE_BOUND = 0.3
EQUIVALENCE_ALPHA = 0.05
SHOWN = f"|rho| < {EQUIVALENCE_BOUND} with 95% confidence"
NOT_SHOWN = "not shown"


@dataclass(frozen=True)
class ModelItems:
    """One model's items on one dataset: answer correct (0/1), genuine and ok counts."""

    correct: np.ndarray
    genuine: np.ndarray
    n: np.ndarray


@dataclass(frozen=True)
class RhoInterval:
    rho: float | None
    ci_low: float | None
    ci_high: float | None
    equivalence: str
    undefined_share: float


def _spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's ρ per row (NaN where a row is constant)."""
    from scipy.stats import rankdata

    rx, ry = rankdata(x, axis=1), rankdata(y, axis=1)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    den = np.sqrt((rx**2).sum(axis=1) * (ry**2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        out: np.ndarray = (rx * ry).sum(axis=1) / den
    return out


def _model_draws(m: ModelItems, rng: np.random.Generator, reps: int) -> tuple[np.ndarray, ...]:
    """(accuracy, rate) of one model per replicate, its items resampled."""
    idx = rng.integers(0, m.n.size, size=(reps, m.n.size))
    scored = ~np.isnan(m.correct)
    c = np.where(scored, m.correct, 0.0)[idx].sum(axis=1)
    s = scored[idx].sum(axis=1)
    g, n = m.genuine[idx].sum(axis=1), m.n[idx].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return c / s, g / n


def rho_interval(
    models: list[ModelItems], seed: int = 0, reps: int = BOOTSTRAP_REPS
) -> RhoInterval:
    """Spearman's ρ of accuracy vs follow-up rate across models, its 95% CI over models
    and items, and the equivalence statement (see the module docstring)."""
    if len(models) < 3:
        return RhoInterval(None, None, None, NOT_SHOWN + " (fewer than 3 models)", 1.0)
    acc = np.array([np.nanmean(m.correct) for m in models])
    rate = np.array([m.genuine.sum() / max(m.n.sum(), 1) for m in models])
    rho = float(_spearman_rows(acc[None, :], rate[None, :])[0])
    rng = np.random.default_rng(seed)
    per = [_model_draws(m, rng, reps) for m in models]
    accs, rates = np.stack([a for a, _ in per]), np.stack([r for _, r in per])  # M × reps
    pick = rng.integers(0, len(models), size=(reps, len(models)))
    cols = np.arange(reps)[:, None]
    x, y = accs[pick, cols], rates[pick, cols]
    distinct = np.array([len(set(row)) for row in pick]) >= 3
    draws = _spearman_rows(x, y)
    ok = distinct & np.isfinite(draws)
    lo, hi = _bounds(draws, ok, 2.5)
    lo90, hi90 = _bounds(draws, ok, 100 * EQUIVALENCE_ALPHA)
    shown = -EQUIVALENCE_BOUND < lo90 and hi90 < EQUIVALENCE_BOUND
    rho_point = rho if np.isfinite(rho) else None
    return RhoInterval(rho_point, lo, hi, SHOWN if shown else NOT_SHOWN, 1 - float(ok.mean()))


def _bounds(draws: np.ndarray, ok: np.ndarray, tail: float) -> tuple[float, float]:
    lo = float(np.percentile(np.where(ok, draws, -1.0), tail))
    hi = float(np.percentile(np.where(ok, draws, 1.0), 100 - tail))
    return lo, hi


@dataclass(frozen=True)
class PairedDelta:
    """A paired difference corrected for the judge's errors, with its 95% CI."""

    delta: float | None
    ci_low: float | None
    ci_high: float | None


def corrected_paired_delta(
    a: ItemCounts,
    b: ItemCounts,
    raw_ci: tuple[float | None, float | None],
    youden: np.ndarray,
    seed: int = 0,
) -> PairedDelta:
    """(rate_a - rate_b) / J on the shared items ``a`` and ``b`` (same order), J = se +
    sp - 1 drawn jointly with the items (``youden``: one draw per replicate)."""
    xa, xb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if xa.size == 0 or xa[:, 1].sum() == 0 or xb[:, 1].sum() == 0 or raw_ci[0] is None:
        return PairedDelta(None, None, None)
    j_point = float(np.mean(youden))
    if j_point <= 0:
        return PairedDelta(None, None, None)
    raw = xa[:, 0].sum() / xa[:, 1].sum() - xb[:, 0].sum() / xb[:, 1].sum()
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, xa.shape[0], size=(youden.size, xa.shape[0]))
    sa, sb = xa[idx].sum(axis=1), xb[idx].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        d = (sa[:, 0] / sa[:, 1] - sb[:, 0] / sb[:, 1]) / np.where(youden > 0, youden, np.nan)
    ok = np.isfinite(d)
    lo1, hi1 = _bounds(np.clip(d, -1, 1), ok, 2.5)
    j_lo, j_hi = (float(np.percentile(youden, q)) for q in (2.5, 97.5))
    rlo, rhi = float(raw_ci[0]), float(raw_ci[1] if raw_ci[1] is not None else raw_ci[0])
    if j_lo > 0:
        lo2, hi2 = min(rlo / j_lo, rlo / j_hi), max(rhi / j_lo, rhi / j_hi)
    else:
        lo2, hi2 = -1.0, 1.0
    point = float(np.clip(raw / j_point, -1, 1))
    lo = max(-1.0, min(lo1, lo2, point))
    hi = min(1.0, max(hi1, hi2, point))
    return PairedDelta(point, lo, hi)
