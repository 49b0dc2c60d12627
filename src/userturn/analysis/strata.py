"""The judge's error rates for one run, from the card's strata, partially pooled.

Why: a judge's sensitivity and specificity differ between datasets (the offline judge's
sensitivity runs 0.46-0.84 across the card's datasets) and between the models that wrote
the turns. Correcting a GSM8K run with the pooled card maps a true 20% to 0%. Using the
GSM8K stratum alone is no better: 13 genuine reference turns give a sensitivity anywhere
in 0.23-0.71. A beta-binomial hierarchy sits between the two: the strata of one axis are
draws from a Beta(μκ, (1 - μ)κ), and each stratum's rate is shrunk toward μ by as much
as its own counts are few and the strata are alike (κ large).

The hierarchy is fit on a grid of (μ, log κ) with the prior p(α, β) ∝ (α + β)^(-5/2)
(Gelman et al., Bayesian Data Analysis, §5.3), so that the uncertainty in how much strata
differ is carried into every draw instead of being plugged in. A run's stratum that the
card covers draws from its posterior Beta(μκ + x, (1 - μ)κ + n - x); a stratum the card
does not cover draws from the population Beta(μκ, (1 - μ)κ), which is as wide as the
strata are apart: extrapolation never prints a narrow interval.

A run has a dataset and a model. A card whose dataset strata break their counts down by
model (``by_model``, cards from 2026-12 on) is fit as one additive logit model of
dataset, model and their cell (``analysis.mixed``), so that a model's effect is measured
against the datasets it wrote, not against the average model. An older card has only
marginal counts: the dataset stratum is the anchor, and the model moves it by its own
deviation from the average model on the logit scale, logit θ = logit θ_dataset +
(logit θ_model - logit μ_model). That assumes no dataset × model interaction and a
similar mix of reference models in every dataset, which such a card cannot check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from userturn.analysis import mixed

MU_GRID = np.linspace(0.0025, 0.9975, 200)
LOG_KAPPA_GRID = np.linspace(np.log(0.5), np.log(5000.0), 80)
ANCHOR = "dataset"
"""The axis whose stratum is the base of a run's error rates."""
SHIFTS = ("model", "family")
"""Axes that shift the anchor; the first one the card has and covers is used (``family``
stands in when a card has family strata and not the run's exact model)."""


@dataclass(frozen=True)
class Hyper:
    """Grid posterior of one axis's (μ, κ) for one side (sensitivity or specificity)."""

    mu: np.ndarray
    kappa: np.ndarray
    weight: np.ndarray
    strata: dict[str, tuple[int, int]]
    """stratum -> (successes, trials): tp, tp + fn for sensitivity; tn, tn + fp for
    specificity."""


@lru_cache(maxsize=256)
def _hyper(counts: tuple[tuple[str, int, int], ...]) -> Hyper:
    from scipy.special import betaln  # scipy costs a second at import: on use

    mu_grid, lk_grid = np.meshgrid(MU_GRID, LOG_KAPPA_GRID, indexing="ij")
    mu, kappa = mu_grid.ravel(), np.exp(lk_grid.ravel())
    a, b = mu * kappa, (1 - mu) * kappa
    loglik = np.zeros_like(mu)
    for _, x, n in counts:
        if n > 0:
            loglik += betaln(a + x, b + n - x) - betaln(a, b)
    logpost = loglik - 0.5 * np.log(kappa)  # (α + β)^(-5/2) on the (μ, log κ) grid
    w = np.exp(logpost - logpost.max())
    return Hyper(mu, kappa, w / w.sum(), {s: (x, n) for s, x, n in counts})


def hyper(block: dict[str, Any], side: str) -> Hyper | None:
    """The hierarchy of one card axis (``strata[axis]``) for ``sens`` or ``spec``; None
    when no stratum has a reference turn on that side."""
    counts = []
    for name, entry in sorted(block.items()):
        s = entry["sigma"]
        x, n = (s["tp"], s["tp"] + s["fn"]) if side == "sens" else (s["tn"], s["tn"] + s["fp"])
        counts.append((str(name), int(x), int(n)))
    if not any(n for _, _, n in counts):
        return None
    return _hyper(tuple(counts))


def draw_stratum(
    h: Hyper, stratum: str | None, rng: np.random.Generator, reps: int
) -> tuple[np.ndarray, np.ndarray]:
    """(θ draws, μ draws): the stratum's rate (the population's when ``stratum`` is None
    or has no turn on this side) and the axis mean, jointly over the hyperposterior."""
    idx = rng.choice(h.mu.size, size=reps, p=h.weight)
    mu, kappa = h.mu[idx], h.kappa[idx]
    x, n = h.strata.get(stratum, (0, 0)) if stratum is not None else (0, 0)
    theta = rng.beta(mu * kappa + x, (1 - mu) * kappa + n - x)
    return theta, mu


@dataclass(frozen=True)
class ErrorDraws:
    """Joint draws of the judge's sensitivity and specificity for one run's strata."""

    sens: np.ndarray
    spec: np.ndarray
    strata: dict[str, str | None] = field(default_factory=dict)
    """Axis -> the card stratum used (None: the card does not cover the run there)."""
    uncovered: tuple[str, ...] = ()
    """What the card lacks, in words (``dataset 'mmlu'``), for ``correction_note``."""
    unpaired: str = ""
    """The card covers the run's dataset and model but not the two together, in words;
    the draws carry the spread of the dataset × model effects."""
    caveat: str = ""
    """Why the additive fit was not used on a card that has the cross counts (it could
    not be fit), for ``correction_note``; empty otherwise."""

    @property
    def point(self) -> tuple[float, float]:
        """Posterior means: the sensitivity and specificity of the point estimate."""
        return float(self.sens.mean()), float(self.spec.mean())


def _match(block: dict[str, Any], *names: str) -> str | None:
    return next((n for n in names if n and n in block), None)


def named_model(model: str) -> str:
    """The registered model a spec runs, for matching a card's ``model`` strata.

    ``hf:smollm2-135m?batch=16`` runs the same weights as ``smollm2-135m`` (the backend
    and its options change how, not what), so it gets that model's stratum rather than
    the wider draws of an unseen model. A trained adapter (``...+sft-user``, or an
    ``adapter=`` option) is other weights: it stays unmatched, and the note says so.
    """
    if "+" in model or "adapter=" in model:
        return model
    name = model.split("?", 1)[0]
    return name.split(":", 1)[1] if ":" in name else name


def _clip(p: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.clip(p, 1e-9, 1 - 1e-9)
    return out


def error_draws(
    card: dict[str, Any],
    dataset: str,
    model: str,
    family: str,
    rng: np.random.Generator,
    reps: int,
) -> ErrorDraws | None:
    """Draws of (se, sp) for a run of ``model`` (``family``) on ``dataset``; None when
    the card has no ``dataset`` strata (then only the pooled counts can be used)."""
    strata = card.get("strata") or {}
    anchor = strata.get(ANCHOR) or {}
    if not anchor:
        return None
    caveat, run = "", _Run(dataset, model, family, rng, reps)
    sens, spec = mixed.cells(anchor, "sens"), mixed.cells(anchor, "spec")
    if sens is not None and spec is not None:
        sides = {"sens": sens, "spec": spec}
        try:
            return _additive(sides, anchor, run)
        except mixed.NotFit as e:
            caveat = f"the dataset × model fit was not used ({e}): marginal strata instead"
    draws = _marginal(strata, anchor, run)
    if draws is None or not caveat:
        return draws
    return ErrorDraws(draws.sens, draws.spec, draws.strata, draws.uncovered, caveat=caveat)


def _model_note(model: str, family: str) -> str:
    fam = f" (family {family!r})" if family else ""
    return f"model {model!r}{fam}"


@dataclass(frozen=True)
class _Run:
    """What error_draws is asked for: a run's dataset, model and family, and how many
    draws from which generator."""

    dataset: str
    model: str
    family: str
    rng: np.random.Generator
    reps: int


def _additive(
    sides: dict[str, mixed.Cells], anchor: dict[str, Any], run: _Run
) -> ErrorDraws | None:
    """Draws from the additive fit (``analysis.mixed``) of the card's cross counts."""
    dataset, model, family, rng, reps = run.dataset, run.model, run.family, run.rng, run.reps
    if not all(sides.values()):
        return None
    models = {str(m): None for e in anchor.values() for m in e["by_model"]}
    used = {
        ANCHOR: _match(anchor, dataset),
        "model": _match(models, model, named_model(model), family),
    }
    uncovered = [] if used[ANCHOR] else [f"dataset {dataset!r}"]
    if used["model"] is None:
        uncovered.append(_model_note(model, family))
    found, who = used[ANCHOR], used["model"]
    pair = mixed.cell_of(found, who) if found is not None and who is not None else None
    draws = {
        side: mixed.draw(mixed.fit(counts), (found, who, pair), rng, reps)
        for side, counts in sides.items()
    }
    unpaired = ""
    if found is not None and who is not None and who not in anchor[found]["by_model"]:
        unpaired = f"dataset {found!r} written by model {who!r}"
    return ErrorDraws(draws["sens"], draws["spec"], used, tuple(uncovered), unpaired)


def _marginal(strata: dict[str, Any], anchor: dict[str, Any], run: _Run) -> ErrorDraws | None:
    """Draws from the marginal hierarchies: the dataset stratum, shifted by the model's
    deviation from the average model."""
    dataset, model, family, rng, reps = run.dataset, run.model, run.family, run.rng, run.reps
    from scipy.special import expit, logit  # scipy costs a second at import: on use

    hs = {side: hyper(anchor, side) for side in ("sens", "spec")}
    if any(h is None for h in hs.values()):
        return None
    used: dict[str, str | None] = {ANCHOR: _match(anchor, dataset)}
    uncovered = [] if used[ANCHOR] else [f"dataset {dataset!r}"]
    logits = {}
    for side, h in hs.items():
        assert h is not None
        theta, _ = draw_stratum(h, used[ANCHOR], rng, reps)
        logits[side] = logit(_clip(theta))
    axis = next((a for a in SHIFTS if strata.get(a)), None)
    if axis is not None:
        block = strata[axis]
        found = _match(block, model, named_model(model), family)
        if found is None and axis == "model" and strata.get("family"):
            axis, block = "family", strata["family"]
            found = _match(block, family)
        used[axis] = found
        if found is None:
            uncovered.append(_model_note(model, family))
        for side in ("sens", "spec"):
            h = hyper(block, side)
            if h is not None:
                theta, mu = draw_stratum(h, found, rng, reps)
                logits[side] = logits[side] + logit(_clip(theta)) - logit(_clip(mu))
    return ErrorDraws(expit(logits["sens"]), expit(logits["spec"]), used, tuple(uncovered))
