"""Whether a run's own turns can move the offline judge's cut: prior shift by EM, per run.

The offline judge finds too few genuine follow-ups among people's own turns: on the 600
held-back ones it judges 63.5% genuine where the reviewers say 78.7%, and a cut of about
0.25 instead of the fitted 0.53 would meet both of people's targets. A run is one model
(or one crowd of people) at one setting, so its turns share a prevalence the judge can
estimate without labels. Saerens, Latinne and Decaestecker (2002) do so by EM: the
adjusted posteriors' mean is the new prior, and a posterior adjusted to the new prior is
the old one times the ratio of the priors. If people's runs have a higher prevalence
than the fit, the cut falls for them alone, with no detector of people's turns needed.

- **Verdicts.** The 1,314 fit turns are judged out of fold (``CrossFitJudge``, the
  recipe re-fit on the other four of ``protocol.folds``, each fold with its own cut);
  the 600 held-back people's turns by the shipped judge.
- **Free turns.** A gate fixes some verdicts whatever P(genuine) says; only the others
  can move. A turn is free if the same judge with a cut of 1e-6 calls it genuine, and
  not by a gate.
- **Runs.** Each stratum stands for one run: small models' turns (judge_train,
  judge_dev), written model-like and written human-like turns (judge_realistic),
  people's turns in the fit (judge_human plus judge_dev's), and the held-back people.
- **Rules.** The training prior is the mean out-of-fold P(genuine) over the free fit
  turns. A run's prior π' is EM's fixed point on its free turns; its cut moves in
  log-odds by ``alpha * (logit π' - logit π)``, for alpha 1 (the method), 0.5 and 0.25
  (damped). The **oracle** moves it by the run's true prevalence among free turns
  instead of EM's estimate: it separates a wrong estimate from a wrong assumption.
- **Figures.** Per run: turns, free turns, reference and EM prevalence, the moved cut,
  and the judged rate, sensitivity and κ on σ before and after, with a 95% interval for
  the change in κ over 2,000 bootstrap draws of whole contexts.

Run: ``.venv/bin/python bench/judge_prior_shift.py`` (about 45 s on two idle cores). The
last line is one JSON object, keys prefixed ``prior_shift_``.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any, NamedTuple

import numpy as np

from userturn.judges import protocol
from userturn.judges.offline import OfflineJudge
from userturn.judges.offline_fit import (
    FOLDS,
    SEED,
    CrossFitJudge,
    Reference,
    default_references,
    heldout_reference,
    load_reference,
)
from userturn.spec import Spec
from userturn.types import JudgeInput, Judgment

ALPHAS = (1.0, 0.5, 0.25)
BOOT = 2000
EPS = 1e-6


def logit(p: float) -> float:
    p = min(max(p, EPS), 1 - EPS)
    return math.log(p / (1 - p))


def with_cut(judge: OfflineJudge, cut: float) -> OfflineJudge:
    """The same fitted judge at another cut (``offline?threshold=``)."""
    spec = Spec(kind="offline", target="", options={"threshold": repr(cut)}, raw="offline")
    return OfflineJudge(spec, params=judge.params)


def judged(judge: OfflineJudge, rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """P(genuine), σ, the judge's own cut and whether the turn is free, per row."""
    inputs = [JudgeInput.of_row(r) for r in rows]
    verdicts = judge.judge(inputs)
    low = with_cut(judge, EPS).judge(inputs)
    return {
        "p": np.array([v.probability for v in verdicts], dtype=float),
        "sigma": np.array([bool(v.genuine) for v in verdicts]),
        "cut": np.full(len(rows), judge.threshold),
        "free": np.array([free(v) for v in low]),
    }


def free(verdict: Judgment) -> bool:
    """Genuine at a cut of ~0, and not by a gate: P(genuine) alone decides this turn."""
    return bool(verdict.genuine) and "genuine by gate" not in verdict.rationale


def em_prior(p: np.ndarray, prior: float, steps: int = 1000) -> float:
    """Saerens et al.'s EM: the prior whose adjusted posteriors average to itself."""
    pi = prior
    for _ in range(steps):
        up = p * pi / prior
        down = (1 - p) * (1 - pi) / (1 - prior)
        new = float(np.mean(up / (up + down)))
        if abs(new - pi) < 1e-9:
            break
        pi = new
    return pi


def moved(v: dict[str, np.ndarray], shift: float) -> np.ndarray:
    """σ after moving each free turn's cut by ``shift`` in log-odds (gated turns keep)."""
    p = np.clip(v["p"], EPS, 1 - EPS)
    cut = np.clip(v["cut"], EPS, 1 - EPS)
    over = np.log(p / (1 - p)) + shift >= np.log(cut / (1 - cut))
    return np.where(v["free"], over, v["sigma"])


def kappa(truth: np.ndarray, pred: np.ndarray) -> float:
    """Cohen's κ on σ (numpy, for the bootstrap: sklearn's costs a minute here)."""
    po = float(np.mean(truth == pred))
    t, q = float(truth.mean()), float(pred.mean())
    pe = t * q + (1 - t) * (1 - q)
    return (po - pe) / (1 - pe) if pe < 1 else float("nan")


def describe(
    truth: np.ndarray, before: np.ndarray, after: np.ndarray, groups: np.ndarray
) -> dict[str, Any]:
    """Judged rate, sensitivity and κ before and after, and a CI for the change in κ."""
    return {
        "judged": [round(float(before.mean()), 3), round(float(after.mean()), 3)],
        "sensitivity": [
            round(float(before[truth].mean()), 3),
            round(float(after[truth].mean()), 3),
        ],
        "kappa": [round(kappa(truth, before), 3), round(kappa(truth, after), 3)],
        "kappa_change_ci": kappa_change_ci(truth, before, after, groups),
    }


def kappa_change_ci(
    truth: np.ndarray, before: np.ndarray, after: np.ndarray, groups: np.ndarray
) -> list[float]:
    """95% interval of κ(after) - κ(before) over bootstrap draws of whole contexts."""
    rng = np.random.default_rng(0)
    names, inv = np.unique(groups, return_inverse=True)
    members = [np.flatnonzero(inv == g) for g in range(len(names))]
    diffs = []
    for _ in range(BOOT):
        d = np.concatenate([members[g] for g in rng.integers(0, len(names), len(names))])
        diffs.append(kappa(truth[d], after[d]) - kappa(truth[d], before[d]))
    lo, hi = np.nanpercentile(diffs, [2.5, 97.5])
    return [round(float(lo), 3), round(float(hi), 3)]


def runs(ref_rows: list[dict[str, Any]], files: np.ndarray) -> dict[str, np.ndarray]:
    styles = protocol.styles(ref_rows)
    out = {
        f.removesuffix(".jsonl"): (files == f) & (styles == "model_output")
        for f in protocol.SMALL_MODEL_FILES
    }
    for s in ("written_model_like", "written_human_like"):
        out[s] = styles == s
    out["people_in_fit"] = styles == "real_human"
    return out


class Views(NamedTuple):
    """The shipped judge, the fit turns judged out of fold and the held-back people."""

    shipped: OfflineJudge
    ref: Reference
    held: Reference
    fit: dict[str, np.ndarray]
    back: dict[str, np.ndarray]


def judge_views() -> Views:
    """Each fit turn judged by the fold judge that did not see it (``CrossFitJudge``, on
    ``protocol.folds``), and the held-back people's turns by the shipped judge."""
    shipped = OfflineJudge(Spec(kind="offline", target="", raw="offline"))
    ref = load_reference(default_references())
    held = load_reference([heldout_reference()])
    cross = CrossFitJudge(ref, shipped)
    fit: dict[str, np.ndarray] = {}
    splits = protocol.folds(ref.rows, ref.genuine, FOLDS, SEED)  # CrossFitJudge's folds
    for (_, test), judge in zip(splits, cross.fold_judges, strict=True):
        assert isinstance(judge, OfflineJudge)
        part = judged(judge, [ref.rows[i] for i in test])
        for key, value in part.items():
            fit.setdefault(key, np.zeros(len(ref.rows), value.dtype))[test] = value
    return Views(shipped, ref, held, fit, judged(shipped, held.rows))


def main() -> int:
    shipped, ref, held, fit, back = judge_views()
    prior = float(fit["p"][fit["free"]].mean())
    pools = [(fit, ref, mask, name) for name, mask in runs(ref.rows, ref.file_of).items()]
    pools.append((back, held, np.ones(len(held.rows), bool), "heldout_people"))
    out: dict[str, Any] = {"training_prior": round(prior, 4)}
    for v, r, mask, name in pools:
        part = {key: value[mask] for key, value in v.items()}
        truth, groups = r.genuine[mask], r.groups[mask]
        pi = em_prior(part["p"][part["free"]], prior)
        oracle = float(truth[part["free"]].mean())
        entry: dict[str, Any] = {
            "n": int(mask.sum()),
            "free": int(part["free"].sum()),
            "prevalence": round(float(truth.mean()), 3),
            "prevalence_free": round(oracle, 3),
            "mean_p_free": round(float(part["p"][part["free"]].mean()), 3),
            "em_prior": round(pi, 3),
        }
        rules = {f"alpha_{a:g}": a * (logit(pi) - logit(prior)) for a in ALPHAS}
        rules["oracle"] = logit(oracle) - logit(prior)
        for rule, shift in rules.items():
            cut = 1 / (1 + math.exp(-(logit(shipped.threshold) - shift)))
            entry[rule] = {"cut": round(cut, 3)} | describe(
                truth, part["sigma"], moved(part, shift), groups
            )
        out[name] = entry
    print(json.dumps(out, indent=1), file=sys.stderr)
    print(json.dumps({f"prior_shift_{k}": v for k, v in out.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
