"""Simulated cells with known truth, for coverage checks of userturn's intervals.

Shared by ``tests/analysis/test_intervals.py`` and ``test_correction.py`` (quick
simulations) and ``bench/interval_coverage.py`` (the full figures), so that the bench
measures exactly what the tests check.

The model: an item's probability of a genuine follow-up is drawn from a Beta with mean p
and intraclass correlation ρ (Var = ρ p(1 - p), which makes ρ the within-item
correlation of σ); each item gets k samples, of which a few are lost to unparseable
judgments, so items have unequal n as in real runs. With ρ = 0 or p at 0 or 1 every item
has probability p exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from userturn.analysis.intervals import CI, ItemCounts


@dataclass(frozen=True)
class Design:
    """How a simulated cell is sampled."""

    items: int
    k: int
    rho: float = 0.2
    drop: float = 0.05
    """Share of samples whose judgment is not ok (so n_i varies)."""


@dataclass(frozen=True)
class Judge:
    """A judge with known error rates, and the size of its reference set (the card)."""

    sens: float
    spec: float
    reference: int = 300
    positives: float = 0.3


def item_probs(rng: np.random.Generator, p: float, rho: float, items: int) -> np.ndarray:
    """Per-item probabilities with mean p and intraclass correlation rho."""
    if p <= 0 or p >= 1 or rho <= 0:
        return np.full(items, p)
    s = (1 - rho) / rho
    return rng.beta(p * s, (1 - p) * s, size=items)


def sample_n(rng: np.random.Generator, d: Design) -> np.ndarray:
    """Ok judgments per item: k samples, each lost with probability ``drop``."""
    return rng.binomial(d.k, 1 - d.drop, size=d.items)


def counts(g: np.ndarray, n: np.ndarray) -> ItemCounts:
    return [(int(a), int(b)) for a, b in zip(g, n, strict=True)]


def cell(rng: np.random.Generator, p: float, d: Design) -> ItemCounts:
    n = sample_n(rng, d)
    return counts(rng.binomial(n, item_probs(rng, p, d.rho, d.items)), n)


def paired(
    rng: np.random.Generator, pa: float, pb: float, d: Design
) -> tuple[ItemCounts, ItemCounts]:
    """Two conditions on the same items. With pa == pb both share each item's
    probability (a perturbation with no effect: truth 0); otherwise the item effects are
    drawn separately."""
    probs_a = item_probs(rng, pa, d.rho, d.items)
    probs_b = probs_a if pa == pb else item_probs(rng, pb, d.rho, d.items)
    na, nb = sample_n(rng, d), sample_n(rng, d)
    a = counts(rng.binomial(na, probs_a), na)
    return a, counts(rng.binomial(nb, probs_b), nb)


def independent(
    rng: np.random.Generator, pa: float, pb: float, d: Design
) -> tuple[ItemCounts, ItemCounts]:
    return cell(rng, pa, d), cell(rng, pb, d)


def judged_cell(
    rng: np.random.Generator, p: float, d: Design, judge: Judge
) -> tuple[ItemCounts, dict[str, int]]:
    """A cell as an imperfect judge sees it, and that judge's card on a reference set."""
    n = sample_n(rng, d)
    true = rng.binomial(n, item_probs(rng, p, d.rho, d.items))
    seen = rng.binomial(true, judge.sens) + rng.binomial(n - true, 1 - judge.spec)
    pos = round(judge.reference * judge.positives)
    neg = judge.reference - pos
    tp, fp = int(rng.binomial(pos, judge.sens)), int(rng.binomial(neg, 1 - judge.spec))
    return counts(seen, n), {"tp": tp, "fn": pos - tp, "fp": fp, "tn": neg - fp}


@dataclass(frozen=True)
class Coverage:
    """Share of simulated intervals that contain the truth, and their mean width."""

    coverage: float
    width: float
    degenerate: float
    """Share of intervals of zero width."""


def coverage(
    draw: Callable[[np.random.Generator], CI], truth: float, sims: int, seed: int
) -> Coverage:
    """Run ``draw`` on ``sims`` seeded simulations and score its intervals against truth."""
    rng = np.random.default_rng(seed)
    hits, widths, zero = 0, [], 0
    for _ in range(sims):
        lo, hi = draw(rng)
        assert lo is not None and hi is not None, "an interval was undefined"
        hits += int(lo - 1e-12 <= truth <= hi + 1e-12)
        widths.append(hi - lo)
        zero += int(hi - lo <= 1e-12)
    return Coverage(hits / sims, float(np.mean(widths)), zero / sims)


@dataclass(frozen=True)
class StrataJudge:
    """A judge whose error rates differ by stratum, as the shipped card's do.

    Each stratum's sensitivity and specificity are drawn from Beta(μκ, (1 - μ)κ); the
    card holds, per stratum, as many genuine and non-genuine reference turns as
    ``sizes``. The run's stratum is ``target`` (an index into ``sizes``), or a fresh
    stratum the card never saw when ``target`` is None.
    """

    sens_mu: float
    sens_kappa: float
    spec_mu: float
    spec_kappa: float
    sizes: tuple[tuple[int, int], ...]
    """(genuine, non-genuine) reference turns per stratum."""
    target: int | None = 0


def shipped_strata_judge(card: dict[str, Any], target: int | None = 0) -> StrataJudge:
    """The hierarchy's posterior-mean (μ, κ) on a card's dataset strata: strata that
    differ as much as that card's do, with its reference sizes (the target first)."""
    from userturn.analysis.strata import hyper

    block = card["strata"]["dataset"]
    out = []
    for side in ("sens", "spec"):
        h = hyper(block, side)
        assert h is not None
        out += [float(h.weight @ h.mu), float(np.exp(h.weight @ np.log(h.kappa)))]
    sizes = [
        (s["sigma"]["tp"] + s["sigma"]["fn"], s["sigma"]["tn"] + s["sigma"]["fp"])
        for s in block.values()
    ]
    return StrataJudge(*out, sizes=tuple(sorted(sizes)), target=target)


def strata_judged_cell(
    rng: np.random.Generator, p: float, d: Design, judge: StrataJudge
) -> tuple[ItemCounts, dict[str, Any], str]:
    """A cell as a stratified judge sees it, the card (pooled and per stratum) and the
    run's dataset name (``"unseen"`` when the card has no such stratum)."""
    k = len(judge.sizes)
    sens = rng.beta(judge.sens_mu * judge.sens_kappa, (1 - judge.sens_mu) * judge.sens_kappa, k + 1)
    spec = rng.beta(judge.spec_mu * judge.spec_kappa, (1 - judge.spec_mu) * judge.spec_kappa, k + 1)
    block, pooled = {}, {"tp": 0, "fn": 0, "fp": 0, "tn": 0}
    for j, (pos, neg) in enumerate(judge.sizes):
        tp, tn = int(rng.binomial(pos, sens[j])), int(rng.binomial(neg, spec[j]))
        sigma = {"tp": tp, "fn": pos - tp, "fp": neg - tn, "tn": tn}
        block[f"d{j}"] = {"sigma": sigma}
        pooled = {key: pooled[key] + sigma[key] for key in pooled}
    t = k if judge.target is None else judge.target
    n = sample_n(rng, d)
    true = rng.binomial(n, item_probs(rng, p, d.rho, d.items))
    seen = rng.binomial(true, sens[t]) + rng.binomial(n - true, 1 - spec[t])
    card = {"sigma": pooled, "strata": {"dataset": block}}
    return counts(seen, n), card, "unseen" if judge.target is None else f"d{t}"


KEYS = ("tp", "fn", "fp", "tn")


def crossed_card(by_model: dict[str, dict[str, dict[str, int]]]) -> dict[str, Any]:
    """A card from its cross counts (dataset -> model -> σ counts), as the card builder
    writes it: pooled, per dataset (with ``by_model``) and per model."""
    datasets = {
        d: {"sigma": {k: sum(c[k] for c in cells.values()) for k in KEYS}, "by_model": cells}
        for d, cells in by_model.items()
    }
    models: dict[str, dict[str, int]] = {}
    for cells in by_model.values():
        for m, c in cells.items():
            total = models.setdefault(m, dict.fromkeys(KEYS, 0))
            for k in KEYS:
                total[k] += c[k]
    pooled = {k: sum(d["sigma"][k] for d in datasets.values()) for k in KEYS}
    return {
        "sigma": pooled,
        "strata": {"dataset": datasets, "model": {m: {"sigma": s} for m, s in models.items()}},
    }


@dataclass(frozen=True)
class CrossedJudge:
    """A judge whose error rates follow the additive logit model of ``analysis.mixed``:
    β + u_dataset + v_model + w_cell per side, each effect drawn afresh per simulation
    from N(0, sd²). The card holds ``sizes`` reference turns per (dataset, model) cell;
    the run is ``target``, a cell of the card or one it never saw."""

    intercept: tuple[float, float]
    """β for sensitivity, specificity."""
    sd: tuple[tuple[float, float, float], tuple[float, float, float]]
    """Per side: the sd of the dataset, model and cell effects."""
    sizes: tuple[tuple[str, str, int, int], ...]
    """(dataset, model, genuine, non-genuine) reference turns per cell."""
    target: tuple[str, str]


def shipped_crossed_judge(card: dict[str, Any], target: tuple[str, str]) -> CrossedJudge:
    """The additive fit's posterior means on a card's cross counts: effects that differ
    as much as that card's do, with its cell sizes."""
    from userturn.analysis import mixed

    anchor = card["strata"]["dataset"]
    fits = []
    for side in ("sens", "spec"):
        cells = mixed.cells(anchor, side)
        assert cells is not None, "the card has no cross counts (by_model)"
        fits.append(mixed.fit(cells))
    sizes = tuple(
        (d, m, s["tp"] + s["fn"], s["tn"] + s["fp"])
        for d, entry in sorted(anchor.items())
        for m, s in sorted(entry["by_model"].items())
    )
    sd = [(float(np.exp(f.vcp[0][0])), float(np.exp(f.vcp[1][0])), float(np.exp(f.vcp[2][0])))
          for f in fits]  # fmt: skip
    return CrossedJudge((fits[0].fe[0], fits[1].fe[0]), (sd[0], sd[1]), sizes, target)


def crossed_judged_cell(
    rng: np.random.Generator, p: float, d: Design, judge: CrossedJudge
) -> tuple[ItemCounts, dict[str, Any]]:
    """A cell as the crossed judge sees it, and the card of its reference turns."""
    from scipy.special import expit

    cells = sorted({(s[0], s[1]) for s in judge.sizes} | {judge.target})
    rates = []
    for beta, (sd_d, sd_m, sd_c) in zip(judge.intercept, judge.sd, strict=True):
        u = {x: rng.normal(0, sd_d) for x in sorted({c[0] for c in cells})}
        v = {x: rng.normal(0, sd_m) for x in sorted({c[1] for c in cells})}
        rates.append({c: float(expit(beta + u[c[0]] + v[c[1]] + rng.normal(0, sd_c)))
                      for c in cells})  # fmt: skip
    by_model: dict[str, dict[str, dict[str, int]]] = {}
    for dataset, model, pos, neg in judge.sizes:
        tp = int(rng.binomial(pos, rates[0][(dataset, model)]))
        tn = int(rng.binomial(neg, rates[1][(dataset, model)]))
        by_model.setdefault(dataset, {})[model] = {"tp": tp, "fn": pos - tp, "fp": neg - tn,
                                                   "tn": tn}  # fmt: skip
    n = sample_n(rng, d)
    true = rng.binomial(n, item_probs(rng, p, d.rho, d.items))
    sens, spec = rates[0][judge.target], rates[1][judge.target]
    seen = rng.binomial(true, sens) + rng.binomial(n - true, 1 - spec)
    return counts(seen, n), crossed_card(by_model)
