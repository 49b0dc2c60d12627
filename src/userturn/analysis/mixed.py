"""The judge's error rates as an additive logit model of dataset, model and their cell.

Why: a card's ``dataset`` and ``model`` strata are marginal counts, and on the shipped
card they are confounded. People wrote 686 of the 1,059 ShareGPT reference turns, so
ShareGPT's stratum already carries the judge's low specificity on people's turns, and a
marginal shift (the dataset stratum moved by the model's distance from the average
model) counts it again for a run of people's turns on ShareGPT; GSM8K's stratum is
lifted by its written turns, which the judge reads well, and a SmolLM2 run there gets
that lift too. The card's cross counts (``by_model`` of each dataset stratum) let the
two axes be fit jointly instead:

    logit P(judge right) = β + u_dataset + v_model + w_dataset×model,

with u, v, w independent normal effects of unknown standard deviations (their logs
normal with sd ``VCP_P``, β normal with sd ``FE_P``), one such model for sensitivity (the
rows are genuine reference turns) and one for specificity (the others). Each effect is
shrunk toward 0 by as much as its own counts are few and its component's spread is
small; the interaction lets a model be judged worse on one dataset than on the rest (the
judge's specificity on SmolLM2's ShareGPT turns is 0.63, against 0.78-0.93 on its other
datasets), and it too is shrunk.

The fit is statsmodels' variational Bayes (``BinomialBayesMixedGLM.fit_vb``): a normal
posterior for β, each effect, and each log standard deviation. A run draws β and, per
component, its level's effect where the card has turns there, else a fresh effect from
the component's population, N(0, σ²) with σ drawn from its posterior: a dataset or
model the card never saw, or a pair it never saw together, widens the draws by as much
as the card's levels are apart.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

COMPONENTS = ("dataset", "model", "dataset × model")
"""The variance components, in the order of ``Fit.vcp``."""
VCP_P = 1.0
"""Prior sd of each log standard deviation: a component's sd is within a factor e of 1
on the logit scale with 68% prior probability, and the data dominate it."""
FE_P = 2.0
"""Prior sd of the intercept (logit scale): flat over sensitivities of 0.12-0.88."""

Cells = tuple[tuple[str, str, int, int], ...]
"""(dataset, model, right, turns) per cell with turns on one side."""


@dataclass(frozen=True)
class Fit:
    """The VB posterior of one side: means and sds of β, each level's effect, and each
    component's log standard deviation."""

    fe: tuple[float, float]
    levels: tuple[dict[str, tuple[float, float]], ...]
    """Per component (``COMPONENTS``): level -> (mean, sd). A cell's level is
    ``dataset|model``."""
    vcp: tuple[tuple[float, float], ...]
    """Per component: (mean, sd) of the log standard deviation."""


class NotFit(Exception):
    """The additive model can't be fit to these counts (the reason is the message)."""


def cells(anchor: dict[str, Any], side: str) -> Cells | None:
    """One side's cross counts from the card's ``dataset`` strata (``by_model``): tp of
    tp + fn for ``sens``, tn of tn + fp for ``spec``; None when a dataset stratum has no
    ``by_model`` (cards written before it)."""
    right, wrong = ("tp", "fn") if side == "sens" else ("tn", "fp")
    out = []
    for dataset, entry in sorted(anchor.items()):
        mix = entry.get("by_model")
        if mix is None:
            return None
        for model, s in sorted(mix.items()):
            x, n = int(s[right]), int(s[right]) + int(s[wrong])
            if n:
                out.append((str(dataset), str(model), x, n))
    return tuple(out)


def cell_of(dataset: str, model: str) -> str:
    """The level of a (dataset, model) pair in the ``dataset × model`` component."""
    return f"{dataset}|{model}"


def _levels(dataset: str, model: str) -> tuple[str, str, str]:
    """A cell's level in each component (``COMPONENTS``)."""
    return dataset, model, cell_of(dataset, model)


@lru_cache(maxsize=64)
def fit(counts: Cells) -> Fit:
    """The VB fit of one side's cells; raises :class:`NotFit` where there is nothing to
    fit (no turns, or the judge right or wrong on every one of them) or the optimiser
    does not converge. Deterministic: the start is fixed."""
    from scipy import sparse  # scipy and statsmodels cost ~1 s at import: on use
    from statsmodels.genmod.bayes_mixed_glm import BinomialBayesMixedGLM
    from statsmodels.tools.sm_exceptions import ConvergenceWarning

    right = sum(x for *_, x, _ in counts)
    total = sum(n for *_, n in counts)
    if right in (0, total):
        raise NotFit(f"the judge is {'right' if right else 'wrong'} on all {total} turns")
    names: list[dict[str, int]] = [{}, {}, {}]  # per component: level -> its column
    for dataset, model, _, _ in counts:
        for c, level in enumerate(_levels(dataset, model)):
            names[c].setdefault(level, len(names[c]))
    offset = np.cumsum([0, len(names[0]), len(names[1])])
    y: list[int] = []
    rows: list[int] = []
    cols: list[int] = []
    for dataset, model, x, n in counts:
        at = len(y)
        y.extend([1] * x + [0] * (n - x))
        for c, level in enumerate(_levels(dataset, model)):
            rows.extend(range(at, at + n))
            cols.extend([int(offset[c]) + names[c][level]] * n)
    width = sum(len(n) for n in names)
    exog_vc = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(y), width))
    ident = np.repeat(np.arange(3), [len(n) for n in names])
    model = BinomialBayesMixedGLM(
        np.asarray(y, dtype=float),
        np.ones((len(y), 1)),
        exog_vc,
        ident,
        vcp_p=VCP_P,
        fe_p=FE_P,
        fep_names=["intercept"],
        vcp_names=list(COMPONENTS),
        vc_names=[level for n in names for level in n],
    )
    start = np.zeros(1 + 3 + width)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        try:
            res = model.fit_vb(mean=start, sd=np.full_like(start, np.exp(-0.5)))
        except ConvergenceWarning as e:
            raise NotFit(f"the variational fit did not converge ({e})") from e
    levels = tuple(
        {
            level: (float(res.vc_mean[offset[c] + i]), float(res.vc_sd[offset[c] + i]))
            for i, level in enumerate(names[c])
        }
        for c in range(3)
    )
    vcp = tuple((float(m), float(s)) for m, s in zip(res.vcp_mean, res.vcp_sd, strict=True))
    return Fit((float(res.fe_mean[0]), float(res.fe_sd[0])), levels, vcp)


def draw(f: Fit, levels: Sequence[str | None], rng: np.random.Generator, reps: int) -> np.ndarray:
    """Draws of P(judge right) for one run: ``levels`` names its dataset, model and cell
    (None where the card has none); each is its level's posterior effect where the fit
    has it, else a fresh effect from its component's population."""
    from scipy.special import expit  # scipy costs a second at import: on use

    z = f.fe[0] + f.fe[1] * rng.standard_normal(reps)
    for c, level in enumerate(levels):
        known = f.levels[c].get(level) if level is not None else None
        if known is not None:
            z = z + known[0] + known[1] * rng.standard_normal(reps)
        else:
            mean, sd = f.vcp[c]
            sigma = np.exp(mean + sd * rng.standard_normal(reps))
            z = z + sigma * rng.standard_normal(reps)
    out: np.ndarray = expit(z)
    return out
