"""Judge-corrected follow-up rates (Rogan–Gladen) with intervals that carry the card.

Why: a judge with sensitivity se and specificity sp reports an observed rate
q = se·p + (1 - sp)(1 - p), not the true rate p. A 2% observed rate from a judge with a
2% false-positive rate is no evidence of genuine follow-ups at all. Rogan & Gladen
(1978) invert that: p = (q + sp - 1) / (se + sp - 1), defined only when se + sp > 1.

The interval must carry two uncertainties: sampling over items (q) and the card's own
sampling error (se and sp were measured on a finite reference set). Each replicate
draws both jointly and transforms them; the 95% interval is the percentile interval of
the transformed draws, clipped to [0, 1]. Two samplers are joined, as for raw cells
(``analysis.intervals``):

- the bootstrap: items resampled with replacement (clusters) for q, and the reference
  examples resampled with replacement (a multinomial on the confusion counts) for se and
  sp;
- its boundary-safe partner: q, se and sp drawn from Jeffreys Beta distributions, q at
  the cell's effective sample size. The plain bootstrap is degenerate when every item is
  at 0% or when the card has no false positive (then every replicate has sp = 1), which
  is the common case for a good judge and exactly where the correction matters most.

When the observed rate lies below the judge's false-positive rate (or above its
sensitivity) the point estimate clips to 0 (or 1), and a percentile interval of clipped
draws could collapse to [0, 0] although small rates are as consistent with the data as
0 is. There the draws are centred on the false-positive rate (the sensitivity) instead
of the observed rate: the interval reports the rates the judge cannot resolve from 0
(the idea of Feldman & Cousins' sensitivity limits, not their construction).

A replicate where se + sp ≤ 1 cannot be inverted: it says any rate is possible, so it
counts as 0 for the lower bound and as 1 for the upper (conservative, never dropped,
since dropping would keep only the draws in which the judge looks informative).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from userturn.analysis import intervals as iv
from userturn.analysis.intervals import BOOTSTRAP_REPS, ItemCounts
from userturn.analysis.strata import ErrorDraws, error_draws

CARD_KEYS = ("tp", "fn", "fp", "tn")
"""Confusion counts of a judge card's ``sigma`` block; positive means genuine."""


@dataclass(frozen=True)
class Corrected:
    """A judge-corrected rate, its 95% CI, and why it is missing or clipped."""

    rate: float | None
    ci_low: float | None
    ci_high: float | None
    defined: bool
    note: str
    strata: dict[str, str | None] = field(default_factory=dict)
    """Card strata the error rates came from (axis -> stratum; None: not covered, so
    extrapolated); empty when the pooled card was used."""
    sens: float | None = None
    spec: float | None = None
    """The sensitivity and specificity behind the point estimate."""


def _card(card_sigma: dict[str, int]) -> tuple[int, int, int, int]:
    missing = [k for k in CARD_KEYS if k not in card_sigma]
    if missing:
        raise ValueError(f"judge card sigma lacks {', '.join(missing)}")
    tp, fn, fp, tn = (int(card_sigma[k]) for k in CARD_KEYS)
    if min(tp, fn, fp, tn) < 0:
        raise ValueError(f"judge card sigma has a negative count: {dict(card_sigma)}")
    return tp, fn, fp, tn


def rogan_gladen(observed: float, sens: float, spec: float) -> float | None:
    """(q + sp - 1) / (se + sp - 1), unclipped; None when se + sp ≤ 1."""
    youden = sens + spec - 1
    return None if youden <= 0 else (observed + spec - 1) / youden


def corrected_rate(
    per_item: ItemCounts,
    card_sigma: dict[str, int],
    seed: int = 0,
    reps: int = BOOTSTRAP_REPS,
) -> Corrected:
    """The cell's rate corrected for its judge's errors, with a CI over items and card.

    Args:
        per_item: (genuine, ok judgments) per item, as the judge saw them.
        card_sigma: the judge card's confusion counts on its reference examples
            (``tp``, ``fn``, ``fp``, ``tn``; positive = genuine).
        seed: seeds both samplers, so summary.json is reproducible.
        reps: replicates per sampler.

    Returns:
        ``defined`` False (rate and CI None, ``note`` saying why) when the cell has no ok
        judgment, the card has no positive or no negative example, or the card's
        sensitivity + specificity ≤ 1. Otherwise the point estimate clipped to [0, 1]
        (``note`` says when it was clipped) and the joined percentile interval.
    """
    tp, fn, fp, tn = _card(card_sigma)
    arr = iv._as_array(per_item)
    why = _undefined(arr, tp, fn, fp, tn)
    if why:
        return Corrected(None, None, None, False, why)
    q, sens, spec = iv._pooled(arr), tp / (tp + fn), tn / (tn + fp)
    raw = rogan_gladen(q, sens, spec)
    assert raw is not None, "checked by _undefined"
    rng = np.random.default_rng(seed)
    resolvable = min(sens, max(1 - spec, q))
    card = (tp, fn, fp, tn)
    lo1, hi1, bad1 = _rg_percentiles(*_bootstrap_draws(arr, card, rng, reps, resolvable - q))
    lo2, hi2, bad2 = _rg_percentiles(*_jeffreys_draws(arr, card, rng, reps, resolvable))
    rate = min(1.0, max(0.0, raw))
    note = _note(raw, max(bad1, bad2))
    return Corrected(
        rate, min(lo1, lo2, rate), max(hi1, hi2, rate), True, note, sens=sens, spec=spec
    )


def stratified_rate(
    per_item: ItemCounts,
    card: dict[str, Any],
    dataset: str,
    model: str,
    family: str = "",
    seed: int = 0,
    reps: int = BOOTSTRAP_REPS,
) -> Corrected:
    """The cell's rate corrected with the error rates of its own strata.

    Sensitivity and specificity come from the card's dataset and model strata, fit
    jointly where the card has their cross counts and partially pooled across strata
    (``analysis.strata``); their draws carry the between-stratum variance, and a run
    the card does not cover draws from the spread across strata (wide, and said in the
    note). A card without strata falls back to :func:`corrected_rate` on its pooled
    counts, and says so. The q samplers, the clipping and the boundary handling are those
    of :func:`corrected_rate`.
    """
    _card(card["sigma"])
    arr = iv._as_array(per_item)
    rng = np.random.default_rng(seed)
    draws = error_draws(card, dataset, model, family, rng, 2 * reps)
    if draws is None:
        pooled = corrected_rate(per_item, card["sigma"], seed, reps)
        extra = "the card has no strata: corrected with its pooled counts"
        return _with_note(pooled, extra)
    if arr.size == 0:
        return Corrected(None, None, None, False, "undefined: no ok judgments in this cell")
    sens, spec = draws.point
    q = iv._pooled(arr)
    raw = rogan_gladen(q, sens, spec)
    if raw is None:
        why = (
            f"undefined: stratum sensitivity {sens:.3f} + specificity {spec:.3f} ≤ 1, so "
            "the judge's verdicts carry no information about σ here"
        )
        return Corrected(None, None, None, False, why, draws.strata, sens, spec)
    resolvable = min(sens, max(1 - spec, q))
    boot_q = np.clip(iv._ratio(iv._resampled_sums(arr, rng, reps)) + resolvable - q, 0.0, 1.0)
    n = float(arr[:, 1].sum()) if iv._single_sample(arr) else iv._floor_n(arr)
    jeff_q = rng.beta(resolvable * n + 0.5, (1 - resolvable) * n + 0.5, size=reps)
    lo1, hi1, bad1 = _rg_percentiles(boot_q, draws.sens[:reps], draws.spec[:reps])
    lo2, hi2, bad2 = _rg_percentiles(jeff_q, draws.sens[reps:], draws.spec[reps:])
    rate = min(1.0, max(0.0, raw))
    parts = [_note(raw, max(bad1, bad2))]
    if draws.uncovered:
        parts.append(
            f"the card has no reference turns from {' or '.join(draws.uncovered)}: "
            "its error rates there are extrapolated from the spread across the card's "
            "strata, and the CI is widened by it"
        )
    if draws.unpaired:
        parts.append(
            f"the card has no reference turns from {draws.unpaired}: the CI carries the "
            "spread of the card's dataset × model effects"
        )
    parts.append(draws.caveat)
    note = "; ".join(p for p in parts if p)
    return Corrected(
        rate, min(lo1, lo2, rate), max(hi1, hi2, rate), True, note, draws.strata, sens, spec
    )


def _with_note(c: Corrected, extra: str) -> Corrected:
    note = "; ".join(p for p in (c.note, extra) if p)
    return Corrected(c.rate, c.ci_low, c.ci_high, c.defined, note, c.strata, c.sens, c.spec)


def _undefined(arr: np.ndarray, tp: int, fn: int, fp: int, tn: int) -> str:
    if arr.size == 0:
        return "undefined: no ok judgments in this cell"
    if tp + fn == 0 or tn + fp == 0:
        side = "genuine" if tp + fn == 0 else "non-genuine"
        return f"undefined: the judge card has no {side} reference example"
    sens, spec = tp / (tp + fn), tn / (tn + fp)
    if sens + spec <= 1:
        return (
            f"undefined: card sensitivity {sens:.3f} + specificity {spec:.3f} ≤ 1, "
            "so the judge's verdicts carry no information about σ"
        )
    return ""


def _note(raw: float, undefined_share: float) -> str:
    parts = []
    if raw < 0:
        parts.append("clipped to 0: the observed rate is below the judge's false-positive rate")
    elif raw > 1:
        parts.append("clipped to 1: the observed rate is above the judge's sensitivity")
    if undefined_share > 0.025:
        parts.append(
            f"in {undefined_share:.0%} of draws the card's sensitivity + specificity ≤ 1 "
            "(counted as 0 for the lower bound, 1 for the upper)"
        )
    return "; ".join(parts)


Draws = tuple[np.ndarray, np.ndarray, np.ndarray]


def _bootstrap_draws(
    arr: np.ndarray,
    card: tuple[int, int, int, int],
    rng: np.random.Generator,
    reps: int,
    shift: float,
) -> Draws:
    """q from items resampled with replacement (moved by ``shift``, see
    :func:`corrected_rate`); se, sp from resampled reference examples."""
    q = np.clip(iv._ratio(iv._resampled_sums(arr, rng, reps)) + shift, 0.0, 1.0)
    conf = rng.multinomial(sum(card), np.asarray(card, dtype=np.float64) / sum(card), size=reps)
    tp, fn, fp, tn = conf.T
    with np.errstate(invalid="ignore", divide="ignore"):
        return q, tp / (tp + fn), tn / (tn + fp)


def _jeffreys_draws(
    arr: np.ndarray,
    card: tuple[int, int, int, int],
    rng: np.random.Generator,
    reps: int,
    q: float,
) -> Draws:
    """q, se, sp from Jeffreys Beta(x + ½, n - x + ½); q at the effective sample size."""
    tp, fn, fp, tn = card
    n = float(arr[:, 1].sum()) if iv._single_sample(arr) else iv._floor_n(arr)
    return (
        rng.beta(q * n + 0.5, (1 - q) * n + 0.5, size=reps),
        rng.beta(tp + 0.5, fn + 0.5, size=reps),
        rng.beta(tn + 0.5, fp + 0.5, size=reps),
    )


def _rg_percentiles(
    q: np.ndarray, sens: np.ndarray, spec: np.ndarray
) -> tuple[float, float, float]:
    """2.5th and 97.5th percentiles of the clipped corrected rate, and the share of
    draws where it is undefined (those count as 0 for the lower bound, 1 for the upper)."""
    youden = sens + spec - 1
    ok = np.isfinite(youden) & np.isfinite(q) & (youden > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.clip((q + spec - 1) / np.where(ok, youden, 1.0), 0.0, 1.0)
    lo = float(np.percentile(np.where(ok, rate, 0.0), 2.5))
    hi = float(np.percentile(np.where(ok, rate, 1.0), 97.5))
    return lo, hi, 1.0 - float(ok.mean())


def cell_error_draws(
    card: dict[str, Any],
    dataset: str,
    model: str,
    family: str = "",
    seed: int = 0,
    reps: int = BOOTSTRAP_REPS,
) -> ErrorDraws:
    """Draws of the judge's (se, sp) for a cell: its strata where the card has them
    (``analysis.strata``), else Jeffreys draws on the pooled counts (no strata named)."""
    rng = np.random.default_rng(seed)
    draws = error_draws(card, dataset, model, family, rng, reps)
    if draws is not None:
        return draws
    tp, fn, fp, tn = _card(card["sigma"])
    return ErrorDraws(
        rng.beta(tp + 0.5, fn + 0.5, size=reps), rng.beta(tn + 0.5, fp + 0.5, size=reps)
    )
