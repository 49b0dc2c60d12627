"""How many LLM calls the cascade saves, and what its settled verdicts cost in κ, out-of-fold.

The cascade keeps the offline verdict of a turn when ``cascade.settle`` allows it (strict
evidence, or P(genuine) outside the bounds ``LO``/``HI``) and asks the LLM otherwise.
Measured on the 1,314 turns the offline judge is fit on (judge_train + judge_dev +
judge_realistic + judge_human), with nothing judged by a model that saw its conversation:

1. **Out-of-fold verdicts.** ``offline_fit.CrossFitJudge`` judges each turn with the
   recipe re-fit on the other four of ``protocol.folds`` (grouped by context).
2. **Nested bounds.** For each of those folds, ``cascade.pick_bounds`` chooses LO/HI on
   the *other* folds' out-of-fold verdicts only, and ``cascade.settle`` applies them to
   the held fold. (The other folds' probabilities come from models that saw the held
   fold; only two scalars are chosen on them, so the leak is small, and re-fitting 20
   inner models would not fit the time budget.)
3. **Figures.** Share of calls saved (overall, per file, per style stratum, per path);
   accuracy and κ of the settled verdicts against the reference, with 95% bootstrap
   CIs over contexts (2,000 resamples, whole conversations drawn, since turns of one
   context are correlated) and the accuracy's Wilson interval; and the same rule on
   the held-back people's turns (``judge_human_heldout.jsonl``, judged by the shipped
   model with the bounds chosen on all out-of-fold verdicts).
4. **Equal κ.** A simulated LLM judge with the paper's error rates (gpt-5.4-mini against
   blinded people: 90.5% agreement, κ 0.726). Assumption: its errors are independent of
   the turn, at a fixed sensitivity and specificity. Agreement and κ fix those rates
   only given the judge's positive rate; taking it equal to the people's gives
   prevalence 0.223, sensitivity 0.787, specificity 0.939 (``PAPER_RATES``); a
   variant with 90.5% on every turn (``UNIFORM_RATES``) is reported beside it. "LLM
   all" is that judge on every turn; "cascade" is the settled verdicts plus the same
   judge's draws on the forwarded turns. The κ of each against the reference is given
   in expectation (expected confusion counts) and as a paired difference over 2,000
   draws (context bootstrap and LLM errors together). **Break-even**: the LLM's
   accuracy on the settled turns (the same on both classes; the paper's rates on the
   rest) above which LLM-all's expected κ beats the cascade's. The settled turns are
   the easy ones, so an LLM is likely more accurate on them than on average; the
   break-even says how much more it may be before the cascade costs κ.

Run: ``.venv/bin/python bench/cascade_oof.py [--oof /tmp/oof.json]`` (41 s on two idle
cores, 2.5 min at load average 5: loading the references and 5 fits; ``--oof`` stores the
out-of-fold verdicts and reuses them on the next run, in seconds). The last line is one
JSON object; it also gives the bounds chosen on all out-of-fold verdicts
(``cascade_oof_bounds_all``), which are the shipped ``cascade.LO`` / ``HI``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from userturn.judges import cascade, load_judge, protocol
from userturn.judges.offline import OfflineJudge
from userturn.judges.offline_fit import (
    FOLDS,
    SEED,
    CrossFitJudge,
    Reference,
    default_references,
    heldout_reference,
    load_reference,
    read_rows,
)
from userturn.spec import Spec
from userturn.stats import wilson
from userturn.types import JudgeInput, Judgment

PAPER = (0.905, 0.726)
"""gpt-5.4-mini against blinded people in the paper: agreement and κ."""
BOOT = 2000


def paper_rates(agreement: float = PAPER[0], kappa: float = PAPER[1]) -> tuple[float, float]:
    """(sensitivity, specificity) of a judge with this agreement and κ whose positive rate
    equals the people's (so false positives and false negatives are equally many)."""
    chance = (agreement - kappa) / (1 - kappa)
    prevalence = 0.5 - math.sqrt((chance - 0.5) / 2)
    err = (1 - agreement) / 2
    return 1 - err / prevalence, 1 - err / (1 - prevalence)


PAPER_RATES = paper_rates()
UNIFORM_RATES = (PAPER[0], PAPER[0])


def inputs_of(rows: list[dict[str, Any]]) -> list[JudgeInput]:
    return [JudgeInput.of_row(r) for r in rows]


def oof_verdicts(ref: Reference, path: Path | None) -> list[Judgment]:
    """CrossFitJudge's verdicts on every reference turn, from ``path`` if it holds them."""
    keys = [[r["id"], r["user_turn"]] for r in ref.rows]
    if path is not None and path.is_file():
        data = json.loads(path.read_text())
        if data["keys"] == keys:
            return [Judgment(**v) for v in data["verdicts"]]
        print(f"{path} holds other turns; re-fitting", file=sys.stderr)
    shipped = OfflineJudge(Spec(kind="offline", target="", raw="offline"))
    verdicts = CrossFitJudge(ref, shipped).judge(inputs_of(ref.rows))
    if path is not None:
        path.write_text(json.dumps({"keys": keys, "verdicts": [v.__dict__ for v in verdicts]}))
    return verdicts


def kappa_of(m: np.ndarray) -> float:
    """Cohen's κ of a 2×2 matrix of (possibly expected) counts, ``m[pred, truth]``."""
    n = m.sum()
    po = (m[0, 0] + m[1, 1]) / n
    pe = (m[0].sum() * m[:, 0].sum() + m[1].sum() * m[:, 1].sum()) / n**2
    return float((po - pe) / (1 - pe)) if pe < 1 else float("nan")


def confusion(pred: np.ndarray, truth: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    w = np.ones(len(pred)) if w is None else w
    return np.array(
        [[np.sum(w * (pred == a) * (truth == b)) for b in (0, 1)] for a in (0, 1)], dtype=float
    )


def expected_llm(truth: np.ndarray, rates: tuple[float, float]) -> np.ndarray:
    """Expected confusion of the simulated LLM on these turns."""
    sens, spec = rates
    pos, neg = float(truth.sum()), float((~truth).sum())
    return np.array([[neg * spec, pos * (1 - sens)], [neg * (1 - spec), pos * sens]])


def context_draws(groups: np.ndarray, reps: int, seed: int = 0) -> list[np.ndarray]:
    """Row indices of ``reps`` bootstrap samples that draw whole contexts."""
    rng = np.random.default_rng(seed)
    names, inv = np.unique(groups, return_inverse=True)
    members = [np.flatnonzero(inv == g) for g in range(len(names))]
    return [
        np.concatenate([members[g] for g in rng.integers(0, len(names), len(names))])
        for _ in range(reps)
    ]


def ci(values: list[float]) -> list[float]:
    lo, hi = np.nanpercentile(values, [2.5, 97.5])
    return [round(float(lo), 3), round(float(hi), 3)]


def settled_quality(
    pred: np.ndarray, truth: np.ndarray, mask: np.ndarray, draws: list[np.ndarray]
) -> dict[str, Any]:
    """Accuracy and κ of the settled verdicts against the reference, with CIs."""
    right = int(np.sum(pred[mask] == truth[mask]))
    n = int(mask.sum())
    accs, kappas = [], []
    for d in draws:
        d = d[mask[d]]
        accs.append(float(np.mean(pred[d] == truth[d])) if len(d) else float("nan"))
        kappas.append(kappa_of(confusion(pred[d], truth[d])) if len(d) else float("nan"))
    lo, hi = wilson(right, n)
    two_sided = 0 < pred[mask].sum() < n  # κ is undefined for a one-sided verdict set
    return {
        "n": n,
        "accuracy": round(right / n, 4) if n else None,
        "accuracy_ci": ci(accs),
        "accuracy_wilson": [round(lo or 0, 3), round(hi or 0, 3)],
        "kappa": round(kappa_of(confusion(pred[mask], truth[mask])), 3) if two_sided else None,
        "kappa_ci": ci(kappas) if two_sided else None,
        "settled_genuine": int(pred[mask].sum()),
    }


def equal_kappa(
    pred: np.ndarray,
    truth: np.ndarray,
    mask: np.ndarray,
    rates: tuple[float, float],
    draws: list[np.ndarray],
) -> dict[str, Any]:
    """Cascade vs LLM-all against the reference, for a simulated LLM with ``rates``."""
    fwd = ~mask
    casc = confusion(pred[mask], truth[mask]) + expected_llm(truth[fwd], rates)
    every = expected_llm(truth, rates)
    k_casc, k_all = kappa_of(casc), kappa_of(every)
    rng = np.random.default_rng(1)
    diffs = []
    for d in draws:
        t = truth[d]
        hit = rng.random(len(d)) < np.where(t, rates[0], rates[1])
        llm = np.where(hit, t, ~t)
        mixed = np.where(mask[d], pred[d], llm)
        diffs.append(kappa_of(confusion(mixed, t)) - kappa_of(confusion(llm, t)))
    return {
        "sensitivity": round(rates[0], 3),
        "specificity": round(rates[1], 3),
        "kappa_cascade": round(k_casc, 4),
        "kappa_llm_all": round(k_all, 4),
        "kappa_diff": round(k_casc - k_all, 4),
        "kappa_diff_ci": ci(diffs),
        "share_draws_cascade_not_worse": round(float(np.mean(np.array(diffs) >= 0)), 3),
        "break_even_llm_accuracy_on_settled": break_even(truth, mask, rates, k_casc),
    }


def break_even(
    truth: np.ndarray, mask: np.ndarray, rates: tuple[float, float], k_casc: float
) -> float | None:
    """The LLM accuracy on the settled turns at which LLM-all's expected κ equals the
    cascade's (bisection; κ rises with it). None if even a perfect LLM there loses."""

    def k_all(acc: float) -> float:
        return kappa_of(expected_llm(truth[mask], (acc, acc)) + expected_llm(truth[~mask], rates))

    lo, hi = 0.5, 1.0
    if k_all(hi) <= k_casc:
        return None
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if k_all(mid) < k_casc else (lo, mid)
    return round((lo + hi) / 2, 4)


def shares(
    mask: np.ndarray, right: np.ndarray, strata: np.ndarray
) -> dict[str, dict[str, float | None]]:
    """Per stratum: turns, share settled, and the settled verdicts' accuracy."""
    out: dict[str, dict[str, float | None]] = {}
    for s in sorted(set(strata.tolist())):
        here = strata == s
        done = mask & here
        acc = round(float(right[done].mean()), 3) if done.any() else None
        out[str(s)] = {"n": int(here.sum()), "saved": round(float(mask[here].mean()), 3)}
        out[str(s)]["settled_accuracy"] = acc
    return out


def heldout_people(bounds: tuple[float, float]) -> dict[str, Any]:
    """The cascade on the held-back people's turns (``protocol.HELDOUT_FILE``), which
    nothing was fit or tuned on: the shipped offline judge with ``bounds``."""
    rows = read_rows(heldout_reference())
    inputs = inputs_of(rows)
    verdicts = load_judge("offline").judge(inputs)
    got = [cascade.settle(i, v, *bounds) for i, v in zip(inputs, verdicts, strict=True)]
    settled = np.array([s is not None for s in got])
    pred = np.array([s is not None and s.genuine for s in got])
    right = pred == np.array([bool(r["genuine_followup"]) for r in rows])
    out: dict[str, Any] = shares(settled, right, np.full(len(rows), "all"))["all"]
    low = settled & ~pred
    out["settled_not_genuine"] = int(low.sum())
    out["settled_not_genuine_accuracy"] = round(float(right[low].mean()), 3) if low.any() else None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--oof", type=Path, help="store / reuse the out-of-fold verdicts here")
    ap.add_argument("--target", type=float, default=cascade.TARGET)
    args = ap.parse_args()
    start = time.perf_counter()
    ref = load_reference(default_references())
    inputs = inputs_of(ref.rows)
    verdicts = oof_verdicts(ref, args.oof)
    print(f"out-of-fold verdicts in {time.perf_counter() - start:.0f} s", file=sys.stderr)

    ok = np.array([v.status == "ok" for v in verdicts])
    said = np.array([v.genuine is True for v in verdicts])
    p = np.array([v.probability if v.probability is not None else np.nan for v in verdicts])
    truth = ref.genuine.astype(bool)
    pairs = zip(inputs, verdicts, strict=True)
    evid = np.array([cascade.settle(i, v, -1.0, 2.0) is not None for i, v in pairs])
    free = ok & ~evid & ~np.isnan(p)
    low_free = free & np.array([cascade.low_open(i) for i in inputs])

    settled = np.zeros(len(inputs), dtype=bool)
    pred = said.copy()
    bounds = []
    for train, test in protocol.folds(ref.rows, ref.genuine, FOLDS, SEED):
        lo, hi = cascade.pick_bounds(
            p[train], said[train], truth[train], free[train], args.target, low_free[train]
        )
        bounds.append([lo, hi])
        for i in test:
            s = cascade.settle(inputs[i], verdicts[i], lo, hi)
            if s is not None:
                settled[i], pred[i] = True, s.genuine
    shipped = cascade.pick_bounds(p, said, truth, free, args.target, low_free)
    conf = settled & ~evid

    draws = context_draws(ref.groups, BOOT)
    out: dict[str, Any] = {
        "cascade_oof_n": len(inputs),
        "cascade_oof_target": args.target,
        "cascade_oof_bounds_per_fold": bounds,
        "cascade_oof_bounds_all": list(shipped),
        "cascade_oof_bounds_shipped": [cascade.LO, cascade.HI],
        "cascade_oof_saved_share": round(float(settled.mean()), 3),
        "cascade_oof_saved_evidence": int(evid.sum()),
        "cascade_oof_saved_low": int(np.sum(conf & ~pred)),
        "cascade_oof_saved_high": int(np.sum(conf & pred)),
        "cascade_oof_saved_by_file": shares(settled, pred == truth, ref.file_of),
        "cascade_oof_saved_by_style": shares(settled, pred == truth, protocol.styles(ref.rows)),
        "cascade_oof_settled": settled_quality(pred, truth, settled, draws),
        "cascade_oof_settled_low": settled_quality(pred, truth, settled & ~pred, draws),
        "cascade_oof_settled_high": settled_quality(pred, truth, settled & pred, draws),
        "cascade_oof_settled_evidence": settled_quality(pred, truth, evid, draws),
        "cascade_oof_offline_all_accuracy": round(float(np.mean(said == truth)), 4),
        "cascade_oof_forwarded_offline_accuracy": round(
            float(np.mean(said[~settled] == truth[~settled])), 4
        ),
        "cascade_oof_equal_kappa_paper": equal_kappa(pred, truth, settled, PAPER_RATES, draws),
        "cascade_oof_equal_kappa_uniform": equal_kappa(pred, truth, settled, UNIFORM_RATES, draws),
        "cascade_heldout_people": heldout_people(shipped),
        "cascade_oof_seconds": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
