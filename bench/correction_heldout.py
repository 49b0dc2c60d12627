"""Whether a corrected rate recovers the reviewers' rate on a run the card never saw.

A corrected rate (``analysis.correction.stratified_rate``) removes the judge's error
rates, measured on the card's reference turns, from a run's judged rate. The card's
counts include every reference turn, so correcting a reference stratum with it would
test the card on its own data. Here each run is left out of the card first: its turns'
verdicts are subtracted from every block they were counted in (the pooled counts and
the model, dataset, style and file strata, and the dataset strata's cross counts by
model; a stratum or cell left empty is dropped, so the run is as uncovered there as a
new one would be). What remains is the card a user would
have had before the run.

- **Verdicts.** Those the shipped card was built from: each of the 1,314 fit turns by the
  fold judge that did not see it (``CrossFitJudge``), and the 600 held-back people's
  turns by the shipped judge. The script checks that they add up to the card's counts.
- **Runs.** Every (file, model, dataset) cell of the fit turns with at least
  ``MIN_RUN`` turns (one model's turns on one dataset, as a user's run is); the
  held-back people's turns by dataset and by labelling batch; and the held-back ShareGPT
  turns cut at random (seed 0) into 10 runs of about 52, which are many runs of one
  kind, for coverage.
- **A Bayesian alternative, side by side** (not what ``userturn`` applies). The
  posterior of the true rate π under a flat prior, with the judged count binomial in
  n at q = π se + (1 − π)(1 − sp), averaged over the same (se, sp) draws the
  stratified correction takes: the posterior median and its 95% highest-density
  interval (which reaches 0 or 1 where the density is highest there). Unlike the
  clipped Rogan–Gladen estimate it never leaves [0, 1] and is shrunk by as much as a
  run is small; it is measured here to see whether it would be the better default.
- **Figures.** Per run: turns, judged and reference rate, the corrected rate with its
  95% CI and whether the CI holds the reference rate. Per group of runs: the mean
  absolute and the mean signed error (bias) of the judged and of the corrected rate
  against the reference rate, and the share of CIs that cover; beside
  them, the rate corrected with the pooled counts of the same left-out card
  (``corrected_rate``), which ignores the strata.

Run: ``.venv/bin/python bench/correction_heldout.py`` (about 90 s on two idle
cores). The last line is one JSON object, keys prefixed ``correction_``.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from judge_prior_shift import judge_views

from userturn.analysis.correction import CARD_KEYS, corrected_rate, stratified_rate
from userturn.analysis.strata import error_draws
from userturn.judges.card import _groups, load_card
from userturn.judges.offline_fit import Reference

MIN_RUN = 20
GRID = np.linspace(0.0, 1.0, 401)
CHUNKS = 10
AXES = ("model", "dataset", "style", "file")


def counts(truth: np.ndarray, sigma: np.ndarray) -> dict[str, int]:
    return {
        "tp": int((sigma & truth).sum()),
        "fn": int((~sigma & truth).sum()),
        "fp": int((sigma & ~truth).sum()),
        "tn": int((~sigma & ~truth).sum()),
    }


def axes_of(ref: Reference) -> dict[str, np.ndarray]:
    """Each turn's stratum on every card axis, by the card's own ``_groups``."""
    named = [dict(_groups(r, Path(f))) for r, f in zip(ref.rows, ref.file_of, strict=True)]
    return {axis: np.array([g[axis] for g in named]) for axis in AXES}


def subtract(entry: dict[str, int], taken: dict[str, int], what: str) -> bool:
    """Take ``taken`` out of the σ counts ``entry`` in place; True when none are left."""
    for key, n in taken.items():
        entry[key] -= n
        assert entry[key] >= 0, f"{what}: the card lacks these turns"
    return not sum(entry.values())


def without(
    card: dict[str, Any], axes: dict[str, np.ndarray], truth: np.ndarray, sigma: np.ndarray
) -> dict[str, Any]:
    """The card as it would be had these turns never been among its reference turns."""
    out = copy.deepcopy(card)
    subtract(out["sigma"], counts(truth, sigma), "pooled")
    for axis in AXES:
        block = out["strata"][axis]
        for name in np.unique(axes[axis]):
            here = axes[axis] == name
            if subtract(
                block[str(name)]["sigma"], counts(truth[here], sigma[here]), f"{axis} {name}"
            ):
                del block[str(name)]
    for name in np.unique(axes["dataset"]):
        if str(name) not in out["strata"]["dataset"]:
            continue  # the run held every turn of this dataset
        mix = out["strata"]["dataset"][str(name)]["by_model"]
        for model in np.unique(axes["model"][axes["dataset"] == name]):
            here = (axes["dataset"] == name) & (axes["model"] == model)
            if subtract(mix[str(model)], counts(truth[here], sigma[here]), f"{name} × {model}"):
                del mix[str(model)]
    return out


def judge_card_check(card: dict[str, Any], truth: np.ndarray, sigma: np.ndarray) -> None:
    """The verdicts here are those the card was built from, count for count."""
    if counts(truth, sigma) != {k: card["sigma"][k] for k in CARD_KEYS}:
        raise SystemExit(f"verdicts {counts(truth, sigma)} do not match the card {card['sigma']}")


def one_run(
    card: dict[str, Any],
    axes: dict[str, np.ndarray],
    truth: np.ndarray,
    sigma: np.ndarray,
    mask: np.ndarray,
) -> dict[str, Any]:
    """Correct the run ``mask`` with the card that never saw it."""
    sub = {a: v[mask] for a, v in axes.items()}
    left = without(card, sub, truth[mask], sigma[mask])
    (dataset,), (model,) = np.unique(sub["dataset"]), np.unique(sub["model"])
    items = [(int(s), 1) for s in sigma[mask]]
    fixed = stratified_rate(items, left, dataset, model)
    pooled = corrected_rate(items, left["sigma"])
    draws = error_draws(left, str(dataset), str(model), "", np.random.default_rng(0), 4000)
    assert draws is not None
    bayes, bayes_ci = posterior(int(sigma[mask].sum()), int(mask.sum()), draws.sens, draws.spec)
    ref_rate = float(truth[mask].mean())
    assert fixed.rate is not None and fixed.ci_low is not None and fixed.ci_high is not None
    assert fixed.sens is not None and fixed.spec is not None and pooled.rate is not None
    return {
        "n": int(mask.sum()),
        "dataset": str(dataset),
        "model": str(model),
        "judged": round(float(sigma[mask].mean()), 3),
        "reference": round(ref_rate, 3),
        "corrected": round(fixed.rate, 3),
        "ci": [round(fixed.ci_low, 3), round(fixed.ci_high, 3)],
        "covers": bool(fixed.ci_low <= ref_rate <= fixed.ci_high),
        "sens_spec": [round(fixed.sens, 3), round(fixed.spec, 3)],
        "uncovered": [a for a, s in fixed.strata.items() if s is None],
        "pooled": round(pooled.rate, 3),
        "posterior": round(bayes, 3),
        "posterior_ci": [round(bayes_ci[0], 3), round(bayes_ci[1], 3)],
        "posterior_covers": bool(bayes_ci[0] <= ref_rate <= bayes_ci[1]),
    }


def posterior(
    k: int, n: int, sens: np.ndarray, spec: np.ndarray
) -> tuple[float, tuple[float, float]]:
    """Median and 95% highest-density interval of π given k of n judged genuine, on a
    grid, under a flat prior, the likelihood averaged over the (se, sp) draws."""
    from scipy.stats import binom

    q = GRID[:, None] * sens[None, :] + (1 - GRID[:, None]) * (1 - spec[None, :])
    post = binom.pmf(k, n, q).mean(axis=1)
    post /= post.sum()
    median = float(GRID[np.searchsorted(np.cumsum(post), 0.5)])
    order = np.argsort(-post)  # the densest grid points until they hold 95%
    kept = GRID[order[: int(np.searchsorted(np.cumsum(post[order]), 0.95)) + 1]]
    return median, (float(kept.min()), float(kept.max()))


def summary(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    judged = np.array([r["judged"] - r["reference"] for r in runs.values()])
    fixed = np.array([r["corrected"] - r["reference"] for r in runs.values()])
    pooled = np.array([r["pooled"] - r["reference"] for r in runs.values()])
    bayes = np.array([r["posterior"] - r["reference"] for r in runs.values()])
    bayes_width = [r["posterior_ci"][1] - r["posterior_ci"][0] for r in runs.values()]
    return {
        "runs": len(runs),
        "judged_mae": round(float(np.abs(judged).mean()), 3),
        "judged_bias": round(float(judged.mean()), 3),
        "corrected_mae": round(float(np.abs(fixed).mean()), 3),
        "corrected_bias": round(float(fixed.mean()), 3),
        "pooled_mae": round(float(np.abs(pooled).mean()), 3),
        "pooled_bias": round(float(pooled.mean()), 3),
        "coverage": round(float(np.mean([r["covers"] for r in runs.values()])), 3),
        "mean_ci_width": round(float(np.mean([r["ci"][1] - r["ci"][0] for r in runs.values()])), 3),
        "posterior_mae": round(float(np.abs(bayes).mean()), 3),
        "posterior_bias": round(float(bayes.mean()), 3),
        "posterior_coverage": round(
            float(np.mean([r["posterior_covers"] for r in runs.values()])), 3
        ),
        "posterior_mean_ci_width": round(float(np.mean(bayes_width)), 3),
    }


def main() -> int:
    views = judge_views()
    card = load_card("offline", views.shipped.version)
    assert card is not None, "the shipped offline card is missing"
    fit_axes, held_axes = axes_of(views.ref), axes_of(views.held)
    axes = {a: np.concatenate([fit_axes[a], held_axes[a]]) for a in AXES}
    truth = np.concatenate([views.ref.genuine, views.held.genuine])
    sigma = np.concatenate([views.fit["sigma"], views.back["sigma"]])
    judge_card_check(card, truth, sigma)
    fit = np.arange(len(truth)) < len(views.ref.rows)

    cells: dict[str, dict[str, Any]] = {}
    cell_of = zip(axes["file"], axes["model"], axes["dataset"], strict=True)
    keys = np.array([f"{f}/{m}/{d}" for f, m, d in cell_of])
    for key in sorted(set(keys[fit])):
        mask = fit & (keys == key)
        if mask.sum() >= MIN_RUN:
            cells[key.replace(".jsonl", "")] = one_run(card, axes, truth, sigma, mask)

    people: dict[str, dict[str, Any]] = {}
    held = ~fit
    batch = np.zeros(len(truth), int)
    batch[np.flatnonzero(held)[300:]] = 1  # the file's second 300 rows: the later batch
    for dataset in ("sharegpt", "healthbench"):
        here = held & (axes["dataset"] == dataset)
        people[dataset] = one_run(card, axes, truth, sigma, here)
        for b in (0, 1):
            part = here & (batch == b)
            people[f"{dataset}_batch{b + 1}"] = one_run(card, axes, truth, sigma, part)
    rng = np.random.default_rng(0)
    share = np.flatnonzero(held & (axes["dataset"] == "sharegpt"))
    rng.shuffle(share)
    chunks: dict[str, dict[str, Any]] = {}
    for k, part in enumerate(np.array_split(share, CHUNKS)):
        mask = np.zeros(len(truth), bool)
        mask[part] = True
        chunks[f"chunk{k}"] = one_run(card, axes, truth, sigma, mask)

    groups: dict[str, dict[str, dict[str, Any]]] = {}
    for key, run in cells.items():
        file = key.split("/")[0]
        small = file in ("judge_train", "judge_dev") and run["model"] != "human"
        group = "small_models" if small else file
        groups.setdefault(group, {})[key] = run
    out: dict[str, Any] = {
        "fit_runs": cells,
        "fit_summary": {g: summary(r) for g, r in sorted(groups.items())},
        "heldout_people": people,
        "heldout_people_summary": summary(people),
        "heldout_chunks": chunks,
        "heldout_chunks_summary": summary(chunks),
    }
    print(json.dumps(out, indent=1), file=sys.stderr)
    print(json.dumps({f"correction_{k}": v for k, v in out.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
