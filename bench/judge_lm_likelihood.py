"""Whether SmolLM2's likelihood of a turn adds to the offline judge where it falls short.

The judge misses two targets: κ 0.70 on small models' turns (0.535 on judge_train,
0.683 on judge_dev) and people's sensitivity of 0.85 (0.72 on the 600 held-back turns).
Its inputs see words, cues and a distilled embedding; the rubric asks whether a turn
depends on the answer and who speaks. ``bench/judge_lm_features.py`` scores each turn
with the embedded SmolLM2 under four conditions; the contrasts here are the ones the
likelihood probe uses (``run/likelihood_plan.py``), on the same text so that its own
predictability cancels:

- ``answer_pmi``: after the real answer minus after another conversation's answer;
- ``role``: under the user header minus under the assistant header;
- ``context_pmi``: after the conversation minus as a first message;
- ``fluency``: the plain mean log-probability after the conversation.

**Test.** Each contrast alone (ROC AUC per stratum), and then as added information: a
logistic regression on the judge's log-odds with and without the contrasts, fit in
grouped 5-fold CV inside one pool of turns (no conversation in two folds). Its cut is
the one that maximises κ on the training folds. Gated turns keep their verdict; only
free turns are re-scored, as the judge itself would. The judge's P(genuine) is
out-of-fold for the fit turns (``CrossFitJudge``) and the shipped judge's for the 600
held-back people's turns. People's pool is also split the honest way round: fit on the
people's turns in the fit, scored on the held-back ones.

Run: ``.venv/bin/python bench/judge_lm_likelihood.py``. It first fills the cache of
``bench/judge_lm_features.py`` (about 65 minutes on two idle cores, resumed where it
stopped), then takes about a minute. The last line is one JSON object, keys prefixed
``lm_``. Not in ``bench/run.py``'s ``ORDER``: it runs only when named.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import judge_lm_features
import numpy as np
from judge_lm_features import cached, key
from judge_prior_shift import EPS, judge_views, kappa, kappa_change_ci
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedGroupKFold

from userturn.judges import protocol
from userturn.judges.offline_fit import FOLDS, SEED, Reference

CONTRASTS = ("answer_pmi", "role", "context_pmi", "fluency")


def contrasts(feats: dict[str, float]) -> list[float] | None:
    if not feats or "asst" not in feats:
        return None
    return [
        feats["user"] - feats["cf"],
        feats["user"] - feats["asst"],
        feats["user"] - feats["alone"],
        feats["user"],
    ]


def stacked(
    x: np.ndarray, y: np.ndarray, train: np.ndarray, test: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """P and σ for ``test`` from a logistic regression fit on ``train`` (cut: max κ)."""
    lr = LogisticRegression(C=1.0, max_iter=2000).fit(x[train], y[train])
    p_train = lr.predict_proba(x[train])[:, 1]
    cuts = np.unique(np.round(p_train, 3))
    best = max(cuts, key=lambda c: kappa(y[train], p_train >= c))
    p = lr.predict_proba(x[test])[:, 1]
    return p, p >= best


def cross_fit(x: np.ndarray, y: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p, s = np.zeros(len(y)), np.zeros(len(y), bool)
    for train, test in StratifiedGroupKFold(FOLDS, shuffle=True, random_state=SEED).split(
        x, y, groups
    ):
        p[test], s[test] = stacked(x, y, train, test)
    return p, s


def compare(pool: dict[str, np.ndarray], fit_mask: np.ndarray | None = None) -> dict[str, Any]:
    """The judge alone against judge + contrasts, on one pool's free turns."""
    y, free, groups = pool["y"], pool["free"], pool["groups"]
    q = np.clip(pool["p"], EPS, 1 - EPS)
    lo = np.log(q / (1 - q))
    base_x, lm_x = lo[:, None], np.column_stack([lo, pool["lm"]])
    out: dict[str, Any] = {"n": len(y), "free": int(free.sum())}
    verdicts = {}
    for name, x in (("judge", base_x), ("judge_lm", lm_x)):
        sigma = pool["sigma"].copy()
        p = pool["p"].copy()
        if fit_mask is None:
            pf, sf = cross_fit(x[free], y[free], groups[free])
            p[free], sigma[free] = pf, sf
            scored = np.ones(len(y), bool)
        else:
            train = np.flatnonzero(free & fit_mask)
            test = np.flatnonzero(free & ~fit_mask)
            p[test], sigma[test] = stacked(x, y, train, test)
            scored = ~fit_mask
        verdicts[name] = sigma
        t, s = y[scored], sigma[scored]
        out[name] = {
            "kappa": round(kappa(t, s), 3),
            "sensitivity": round(float(s[t].mean()), 3),
            "specificity": round(float((~s[~t]).mean()), 3),
            "judged": round(float(s.mean()), 3),
            "auc_free": round(float(roc_auc_score(y[scored & free], p[scored & free])), 3),
        }
    scored = np.ones(len(y), bool) if fit_mask is None else ~fit_mask
    out["reference_rate"] = round(float(y[scored].mean()), 3)
    out["kappa_change_ci"] = kappa_change_ci(
        y[scored], verdicts["judge"][scored], verdicts["judge_lm"][scored], groups[scored]
    )
    out["shipped_cut"] = {
        "kappa": round(kappa(y[scored], pool["sigma"][scored]), 3),
        "sensitivity": round(float(pool["sigma"][scored][y[scored]].mean()), 3),
    }
    return out


def alone(pool: dict[str, np.ndarray]) -> dict[str, float]:
    y = pool["y"]
    out = {"judge_p": round(float(roc_auc_score(y, pool["p"])), 3)}
    for j, name in enumerate(CONTRASTS):
        out[name] = round(float(roc_auc_score(y, pool["lm"][:, j])), 3)
    return out


def main() -> int:
    judge_lm_features.main()  # fills the cache (resumes; nothing to do once complete)
    _, ref, held, fit, back = judge_views()
    return report(ref, held, fit, back)


def report(
    ref: Reference, held: Reference, fit: dict[str, np.ndarray], back: dict[str, np.ndarray]
) -> int:
    feats = cached()

    def pool(v: dict[str, np.ndarray], r: Reference, mask: np.ndarray) -> dict[str, np.ndarray]:
        lm = [contrasts(feats.get(key(row), {})) for row in r.rows]
        have = np.array([c is not None for c in lm]) & mask
        rows = np.flatnonzero(have)
        return {
            "p": v["p"][rows],
            "sigma": v["sigma"][rows],
            "free": v["free"][rows],
            "y": r.genuine[rows],
            "groups": r.groups[rows],
            "lm": np.array([lm[i] for i in rows], dtype=float).reshape(len(rows), len(CONTRASTS)),
            "missing": np.array(int(mask.sum() - have.sum())),
        }

    styles = protocol.styles(ref.rows)
    pools = {
        "model_output": pool(fit, ref, styles == "model_output"),
        "judge_train": pool(
            fit, ref, (styles == "model_output") & (ref.file_of == "judge_train.jsonl")
        ),
        "written_model_like": pool(fit, ref, styles == "written_model_like"),
        "written_human_like": pool(fit, ref, styles == "written_human_like"),
        "people_in_fit": pool(fit, ref, styles == "real_human"),
        "heldout_people": pool(back, held, np.ones(len(held.rows), bool)),
    }
    out: dict[str, Any] = {}
    for name, p in pools.items():
        if len(p["y"]) < 50:
            out[name] = {"skipped": f"{len(p['y'])} rows scored"}
            continue
        out[name] = {"missing": int(p["missing"]), "auc_alone": alone(p), "cv": compare(p)}
    fitp, backp = pools["people_in_fit"], pools["heldout_people"]
    if len(fitp["y"]) >= 50 and len(backp["y"]) >= 50:
        both = {
            k: np.concatenate([fitp[k], backp[k]])
            for k in ("p", "sigma", "free", "y", "groups", "lm")
        }
        mask = np.r_[np.ones(len(fitp["y"]), bool), np.zeros(len(backp["y"]), bool)]
        out["people_fit_to_heldout"] = compare(both, mask)
    print(json.dumps(out, indent=1), file=sys.stderr)
    print(json.dumps({f"lm_{k}": v for k, v in out.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
