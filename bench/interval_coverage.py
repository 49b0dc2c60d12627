"""Coverage of userturn's 95% intervals by simulation (issues I and H).

Run: ``.venv/bin/python bench/interval_coverage.py [--sims N] [--crossed-sims M]``
(default 1000 simulated cells per scenario, 400 per crossed one, which refits a card per
cell; about 5 minutes on 2 busy cores, and 32 more for the crossed ones). The last line
is JSON.

Each scenario draws cells with a known truth from ``tests/analysis/coverage_sim.py``
(item probabilities from a Beta with mean p and intraclass correlation ρ, k samples per
item, 5% of judgments lost) and reports the share of intervals that contain the truth,
their mean width, and the share of zero-width intervals. Keys:

- ``coverage_cell_k1_p*``: one sample per item (Wilson), 50 items.
- ``coverage_cell_p*``: 20 items × k = 4, ρ = 0.2 (few, correlated items);
  ``coverage_cell_rho05_p*``: 50 items × k = 4, ρ = 0.5.
- ``baseline_cell_p*_plain_bootstrap``: the percentile cluster bootstrap alone (before).
- ``coverage_delta[_k1]_p*``: paired deltas, both conditions at p sharing each item's
  probability (truth 0); ``..._shift``: 5% against 0% (truth 0.05).
- ``coverage_indep[_k1]_p*``: independent differences, same scenarios.
- ``coverage_corrected[_k1|_strong]_p*``: Rogan–Gladen corrected rates for a judge with
  sensitivity 0.90 and specificity 0.95 (``_strong``: 0.95 and 0.99) whose card comes
  from 300 reference examples, 30% genuine; 50 items × k = 4 (``_k1``: 100 × 1).

- ``coverage_stratified[_k4|_unseen]_p*``: the stratum-aware correction when the judge's
  error rates differ between strata as much as the shipped offline card's datasets do
  (strata drawn from the hierarchy fit to that card, with its reference sizes); the run
  is the card's smallest stratum, 50 items × 1 (``_k4``: × 4; ``_unseen``: a stratum the
  card never saw). ``baseline_stratified[_unseen]_p*_pooled``: the pooled-card
  correction on the same cells (before).
- ``coverage_crossed[_unseen_model]_p*``: the same correction on a card with cross counts
  (``by_model``), when the judge's error rates follow the additive dataset × model model
  (``analysis.mixed``) with the spreads fit to the shipped card, and its cell sizes:
  every effect is drawn afresh per cell, the card refit each time. The run is SmolLM2 on
  GSM8K, a cell of the card (``_unseen_model``: a model the card never saw, on GSM8K),
  50 items × 1.
- ``coverage_gf4_corrected_p*``: GF@4 corrected through the judge's error model (the
  pooled rates of the offline card the audit used), 50 items × 4; ``null_gf4``: its null
  floor.
- ``coverage_spread_{never,sometimes,always}_p*``: the item spread corrected the same
  way, same cells; the truth is the cell's own items' (1 - π)^4 and π^4, averaged.

p0, p002, p02, p05 stand for p = 0, 0.02, 0.2, 0.5.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "analysis"))

from coverage_sim import (
    CrossedJudge,
    Design,
    Judge,
    StrataJudge,
    cell,
    coverage,
    crossed_judged_cell,
    independent,
    judged_cell,
    paired,
    shipped_crossed_judge,
    shipped_strata_judge,
    strata_judged_cell,
)

from userturn.analysis import intervals as I
from userturn.analysis.correction import corrected_rate, stratified_rate
from userturn.analysis.sampling import corrected_gf_at_k, corrected_spread

PS = {"p0": 0.0, "p002": 0.02, "p05": 0.5}
SINGLE = Design(items=50, k=1)
FEW = Design(items=20, k=4, rho=0.2)
STRONG = Design(items=50, k=4, rho=0.5)
Draw = Callable[[np.random.Generator], I.CI]
CROSSED_PAIR = ("gsm8k", "smollm2-135m")
"""The run of the crossed scenarios: ``make run``'s cell, 9 genuine and 34 other
reference turns on the shipped card."""


def _plain_bootstrap(p: float) -> Draw:
    def draw(r: np.random.Generator) -> I.CI:
        arr = I._as_array(cell(r, p, FEW))
        sums = I._resampled_sums(arr, np.random.default_rng(0), I.BOOTSTRAP_REPS)
        return I._percentile_ci(I._ratio(sums))

    return draw


def _corrected(p: float, design: Design, judge: Judge) -> Draw:
    def draw(r: np.random.Generator) -> I.CI:
        got = corrected_rate(*judged_cell(r, p, design, judge))
        return got.ci_low, got.ci_high

    return draw


def _stratified(p: float, design: Design, judge: StrataJudge, pooled: bool = False) -> Draw:
    def draw(r: np.random.Generator) -> I.CI:
        per_item, card, dataset = strata_judged_cell(r, p, design, judge)
        if pooled:
            got = corrected_rate(per_item, card["sigma"])
        else:
            got = stratified_rate(per_item, card, dataset, "m")
        if not got.defined:  # "the judge carries no information here": any rate
            return 0.0, 1.0
        return got.ci_low, got.ci_high

    return draw


GF_SENS, GF_SPEC = (121, 39), (267, 50)
"""The pooled (tp, fn) and (tn, fp) of the offline card the audit used (se 0.756, sp
0.842), kept so that the figures stay comparable across refits of the card."""


def _crossed(p: float, design: Design, judge: CrossedJudge) -> Draw:
    def draw(r: np.random.Generator) -> I.CI:
        per_item, card = crossed_judged_cell(r, p, design, judge)
        got = stratified_rate(per_item, card, *judge.target)
        if not got.defined:  # "the judge carries no information here": any rate
            return 0.0, 1.0
        return got.ci_low, got.ci_high

    return draw


def _gf4(p: float) -> tuple[Draw, float]:
    """Corrected GF@4; the truth is the mean over items of 1 - (1 - π)^4, whose mean
    over simulations for Beta(4p, 4(1 - p)) items is 1 - B(4p, 4 - 4p + 4) / B(4p, 4 - 4p)."""
    from scipy.special import betaln

    se = GF_SENS[0] / sum(GF_SENS)
    sp = GF_SPEC[0] / sum(GF_SPEC)
    truth = (
        0.0
        if p == 0
        else float(1 - np.exp(betaln(4 * p, 4 - 4 * p + 4) - betaln(4 * p, 4 - 4 * p)))
    )

    def draw(r: np.random.Generator) -> I.CI:
        probs = np.zeros(50) if p == 0 else r.beta(4 * p, 4 * (1 - p), 50)
        true = r.binomial(4, probs)
        seen = r.binomial(true, se) + r.binomial(4 - true, 1 - sp)
        sens = r.beta(GF_SENS[0] + 0.5, GF_SENS[1] + 0.5, 1000)
        spec = r.beta(GF_SPEC[0] + 0.5, GF_SPEC[1] + 0.5, 1000)
        got = corrected_gf_at_k([(int(x), 4) for x in seen], sens, spec, (se, sp))[4]
        return got.ci_low, got.ci_high

    return draw, truth


class _SpreadDraw:
    """One corrected share of the item spread per simulated cell. Its truth depends on
    the cell's own items, so ``coverage`` gets a truth it cannot hold fixed: this draw
    returns the interval shifted by the cell's truth, and the scenario's truth is 0."""

    def __init__(self, p: float, share: str) -> None:
        self.p, self.share = p, share

    def __call__(self, r: np.random.Generator) -> I.CI:
        se = GF_SENS[0] / sum(GF_SENS)
        sp = GF_SPEC[0] / sum(GF_SPEC)
        probs = np.zeros(50) if self.p == 0 else r.beta(4 * self.p, 4 * (1 - self.p), 50)
        true = r.binomial(4, probs)
        seen = r.binomial(true, se) + r.binomial(4 - true, 1 - sp)
        sens = r.beta(GF_SENS[0] + 0.5, GF_SENS[1] + 0.5, 1000)
        spec = r.beta(GF_SPEC[0] + 0.5, GF_SPEC[1] + 0.5, 1000)
        got = corrected_spread([(int(x), 4) for x in seen], sens, spec, (se, sp))
        assert got is not None
        never, always = float(np.mean((1 - probs) ** 4)), float(np.mean(probs**4))
        truth = {"never": never, "always": always, "sometimes": 1 - never - always}
        m = getattr(got, self.share)
        assert m.ci_low is not None and m.ci_high is not None
        return m.ci_low - truth[self.share], m.ci_high - truth[self.share]


def _cell(p: float, d: Design) -> Draw:
    return lambda r: I.rate_interval(cell(r, p, d))[0]


def _delta(pa: float, pb: float, d: Design) -> Draw:
    return lambda r: I.paired_diff_interval(*paired(r, pa, pb, d))[0]


def _indep(pa: float, pb: float, d: Design) -> Draw:
    return lambda r: I.independent_diff_interval(*independent(r, pa, pb, d))[0]


def scenarios() -> dict[str, tuple[Draw, float]]:
    """Name → (draw one interval, truth)."""
    out: dict[str, tuple[Draw, float]] = {}
    for tag, p in PS.items():
        for name, d in [("cell_k1", SINGLE), ("cell", FEW), ("cell_rho05", STRONG)]:
            out[f"coverage_{name}_{tag}"] = (_cell(p, d), p)
        if p > 0:
            out[f"baseline_cell_{tag}_plain_bootstrap"] = (_plain_bootstrap(p), p)
    pairs = {**{tag: (p, p) for tag, p in PS.items()}, "shift": (0.05, 0.0)}
    for tag, (pa, pb) in pairs.items():
        for suffix, d in [("_k1", SINGLE), ("", FEW)]:
            out[f"coverage_delta{suffix}_{tag}"] = (_delta(pa, pb, d), pa - pb)
            out[f"coverage_indep{suffix}_{tag}"] = (_indep(pa, pb, d), pa - pb)
    judges = [("", Design(50, 4), Judge(0.9, 0.95)), ("_k1", Design(100, 1), Judge(0.9, 0.95))]
    judges.append(("_strong", Design(50, 4), Judge(0.95, 0.99)))
    for tag, p in PS.items():
        for suffix, d, j in judges:
            out[f"coverage_corrected{suffix}_{tag}"] = (_corrected(p, d, j), p)
    card = json.loads(
        resources.files("userturn.judges").joinpath("cards", "offline.json").read_text()
    )
    if card.get("strata"):
        small, unseen = shipped_strata_judge(card, 0), shipped_strata_judge(card, None)
        for tag, p in {**PS, "p02": 0.2}.items():
            out[f"coverage_stratified_{tag}"] = (_stratified(p, Design(50, 1), small), p)
            out[f"coverage_stratified_k4_{tag}"] = (_stratified(p, Design(50, 4), small), p)
            out[f"coverage_stratified_unseen_{tag}"] = (_stratified(p, Design(50, 1), unseen), p)
            pooled = _stratified(p, Design(50, 1), small, pooled=True)
            out[f"baseline_stratified_{tag}_pooled"] = (pooled, p)
            pooled = _stratified(p, Design(50, 1), unseen, pooled=True)
            out[f"baseline_stratified_unseen_{tag}_pooled"] = (pooled, p)
            out[f"coverage_gf4_corrected_{tag}"] = _gf4(p)
            for share in ("never", "sometimes", "always"):
                out[f"coverage_spread_{share}_{tag}"] = (_SpreadDraw(p, share), 0.0)
    if all("by_model" in e for e in card.get("strata", {}).get("dataset", {}).values()):
        pair = shipped_crossed_judge(card, CROSSED_PAIR)
        new_model = shipped_crossed_judge(card, (CROSSED_PAIR[0], "unseen-model"))
        for tag, p in {**PS, "p02": 0.2}.items():
            out[f"coverage_crossed_{tag}"] = (_crossed(p, Design(50, 1), pair), p)
            out[f"coverage_crossed_unseen_model_{tag}"] = (_crossed(p, Design(50, 1), new_model), p)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=1000, help="simulated cells per scenario")
    ap.add_argument("--only", default="", help="run only scenarios whose name contains this")
    ap.add_argument(
        "--crossed-sims",
        type=int,
        default=400,
        help="simulated cells per crossed scenario (each refits a card: about 0.6 s a cell)",
    )
    args = ap.parse_args()
    start = time.perf_counter()
    result: dict[str, float | int] = {}
    widths: dict[str, float] = {}
    degenerate = 0.0
    for i, (name, (draw, truth)) in enumerate(sorted(scenarios().items())):
        if args.only not in name:
            continue
        sims = args.crossed_sims if "_crossed_" in name else args.sims
        got = coverage(draw, truth, sims, seed=1000 + i)
        result[name] = round(got.coverage, 4)
        widths["width_" + name.removeprefix("coverage_")] = round(got.width, 4)
        if not name.startswith("baseline"):
            degenerate = max(degenerate, got.degenerate)
        print(f"{name:45s} coverage {got.coverage:.3f}  width {got.width:.3f}", flush=True)
    result.update(widths)
    result["null_gf4"] = round(1 - (GF_SPEC[0] / sum(GF_SPEC)) ** 4, 4)
    result["degenerate_share_max"] = degenerate
    result["sims_per_scenario"] = args.sims
    result["sims_per_crossed_scenario"] = args.crossed_sims
    result["interval_coverage_seconds"] = round(time.perf_counter() - start, 1)
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
