"""The stratified correction against a Bayesian posterior, on simulated cells.

``bench/correction_heldout.py`` compares the two on real runs left out of the card; the
posterior there had the lower error in every group. Real runs cannot show what happens
at a true rate of 0 or 2%, where an interval must still reach the truth, so this draws
cells as ``bench/interval_coverage.py --only crossed`` does (every dataset, model and
cell effect afresh from the spreads fit to the shipped card, the card refit per cell;
``make run``'s SmolLM2 × GSM8K, 50 single-sample items) and scores both estimates of
each cell against its true rate: coverage, mean width, bias and mean absolute error.

- **Stratified**: ``analysis.correction.stratified_rate``, what ``userturn`` reports.
- **Posterior**: ``correction_heldout.posterior`` on the judged count, over the same
  (se, sp) draws: the median and the 95% highest-density interval under a flat prior.

Run: ``.venv/bin/python bench/correction_posterior.py [--sims N]`` (default 200 cells
per rate, about 0.6 s a cell). The last line is one JSON object, keys prefixed
``posterior_``.
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib import resources
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "analysis"))
from correction_heldout import posterior
from coverage_sim import Design, crossed_judged_cell, shipped_crossed_judge
from interval_coverage import CROSSED_PAIR

from userturn.analysis.correction import stratified_rate
from userturn.analysis.strata import error_draws

RATES = (0.0, 0.02, 0.2, 0.5)


def scenario(p: float, sims: int) -> dict[str, dict[str, float]]:
    """Both estimates over ``sims`` cells at true rate ``p``."""
    card = json.loads(
        resources.files("userturn.judges").joinpath("cards", "offline.json").read_text()
    )
    judge = shipped_crossed_judge(card, CROSSED_PAIR)
    rng = np.random.default_rng(0)
    got: dict[str, list[tuple[float, float, float]]] = {"stratified": [], "posterior": []}
    for _ in range(sims):
        per_item, cell_card = crossed_judged_cell(rng, p, Design(50, 1), judge)
        fixed = stratified_rate(per_item, cell_card, *CROSSED_PAIR)
        rate = fixed.rate if fixed.defined and fixed.rate is not None else 0.5
        low = fixed.ci_low if fixed.ci_low is not None else 0.0
        high = fixed.ci_high if fixed.ci_high is not None else 1.0
        got["stratified"].append((rate, low, high))
        draws = error_draws(cell_card, *CROSSED_PAIR, "", np.random.default_rng(0), 4000)
        assert draws is not None
        k, n = sum(g for g, _ in per_item), sum(m for _, m in per_item)
        median, (lo, hi) = posterior(k, n, draws.sens, draws.spec)
        got["posterior"].append((median, lo, hi))
    out = {}
    for name, rows in got.items():
        a = np.array(rows)
        err = a[:, 0] - p
        out[name] = {
            "coverage": round(float(((a[:, 1] <= p) & (p <= a[:, 2])).mean()), 3),
            "mean_width": round(float((a[:, 2] - a[:, 1]).mean()), 3),
            "bias": round(float(err.mean()), 3),
            "mae": round(float(np.abs(err).mean()), 3),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=200, help="simulated cells per rate")
    args = parser.parse_args()
    out = {f"posterior_p{p:g}": scenario(p, args.sims) for p in RATES}
    out["posterior_sims"] = args.sims  # type: ignore[assignment]
    for key, value in out.items():
        print(key, value, file=sys.stderr)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
