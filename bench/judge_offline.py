"""Honest agreement of the offline judge (and the rules baseline) with reference labels.

Every figure comes from turns the scored model was not fit on:

- ``*_cv_*``: repeated stratified 5-fold cross-validation over judge_train + judge_dev;
  the whole recipe (forests, calibration, threshold; for rules, the thresholds) is re-fit
  on the training folds. The features were frozen before any of these folds were scored.
- ``*_heldout_dev_*``: fit on judge_train only, scored on judge_dev. The features were
  chosen while looking at judge_train cross-validation only; dev stayed unseen until then.
- ``*_lomo_*`` / ``*_lodo_*``: leave one model / one dataset out (pooled over the groups).
- ``*_control_*``: the shipped judge on tests/judges/fixtures/control_set.jsonl (planted
  cases, never fit on).
- ``offline_judge_turns_per_s``: the shipped judge over every reference and control turn,
  in batches of 64, caches cleared first; the median of 5 passes.

κ CIs are percentile bootstraps over turns (2,000 resamples) of the first repeat's
out-of-fold verdicts. Run: ``.venv/bin/python bench/judge_offline.py [--repeats 3]``; the
last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import cohen_kappa_score
from sklearn.model_selection import StratifiedKFold

from userturn.judges.base import Judge
from userturn.judges.offline import OfflineJudge, Params
from userturn.judges.offline_features import _extras
from userturn.judges.offline_fit import Reference, default_references, fit_arrays, load_reference
from userturn.judges.rules import RulesJudge, Thresholds, fit_thresholds
from userturn.judges.rules_features import _view, measure
from userturn.spec import Spec
from userturn.types import JudgeInput

REPO = Path(__file__).resolve().parents[1]
CONTROL = REPO / "tests" / "judges" / "fixtures" / "control_set.jsonl"
Split = tuple[np.ndarray, np.ndarray]
Fitter = Callable[[Reference, np.ndarray], Judge]


def inputs(rows: list[dict[str, Any]]) -> list[JudgeInput]:
    return [JudgeInput(r["id"], tuple(r["messages"]), r["user_turn"]) for r in rows]


def subset(ref: Reference, idx: np.ndarray) -> Reference:
    return Reference(
        [ref.rows[i] for i in idx], ref.x[idx], ref.genuine[idx], ref.labels[idx], ref.files
    )


def fit_offline(ref: Reference, train: np.ndarray) -> Judge:
    params = Params.from_json(fit_arrays(ref.x[train], ref.genuine[train], ref.labels[train]))
    return OfflineJudge(Spec(kind="offline", target="", raw="offline"), params=params)


def fit_rules(ref: Reference, train: np.ndarray) -> Judge:
    feats = [measure(ref.rows[i]["messages"], ref.rows[i]["user_turn"]) for i in train]
    judge = RulesJudge(Spec(kind="rules", target="", raw="rules"))
    judge.thresholds = fit_thresholds(feats, ref.genuine[train].tolist())
    return judge


def predict(ref: Reference, splits: Iterator[Split], fit: Fitter) -> tuple[np.ndarray, ...]:
    """Out-of-split σ and labels: each test part is judged by a judge fit without it."""
    sigma = np.zeros(len(ref.rows), dtype=bool)
    labels = np.empty(len(ref.rows), dtype=object)
    for train, test in splits:
        verdicts = fit(ref, train).judge(inputs([ref.rows[i] for i in test]))
        sigma[test] = [bool(v.genuine) for v in verdicts]
        labels[test] = [v.label for v in verdicts]
    return sigma, labels


def kfold(ref: Reference, seed: int) -> Iterator[Split]:
    return iter(StratifiedKFold(5, shuffle=True, random_state=seed).split(ref.x, ref.genuine))


def leave_one_out(ref: Reference, key: str) -> Iterator[Split]:
    groups = np.array([str(r.get(key)) for r in ref.rows])
    for g in sorted(set(groups)):
        yield np.flatnonzero(groups != g), np.flatnonzero(groups == g)


def kappa_ci(y: np.ndarray, pred: np.ndarray, n_boot: int = 2000) -> dict[str, float]:
    """κ with a percentile bootstrap CI over turns (seeded)."""
    rng = np.random.default_rng(0)
    boots = []
    for _ in range(n_boot):
        i = rng.integers(0, len(y), len(y))
        boots.append(cohen_kappa_score(y[i], pred[i]))
    lo, hi = np.nanpercentile(boots, [2.5, 97.5])
    return {"kappa": round(float(cohen_kappa_score(y, pred)), 4), "low": round(lo, 4),
            "high": round(hi, 4)}  # fmt: skip


def summarise(ref: Reference, sigma: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    ci = kappa_ci(ref.genuine, sigma)
    return {
        "kappa": ci["kappa"],
        "kappa_ci": [ci["low"], ci["high"]],
        "label_kappa": round(float(cohen_kappa_score(ref.labels, labels.astype(str))), 4),
        "rate": round(float(sigma.mean()), 4),
        "sensitivity": round(float(sigma[ref.genuine].mean()), 4),
        "specificity": round(float(1 - sigma[~ref.genuine].mean()), 4),
    }


def per_group(ref: Reference, key: str, sigma: np.ndarray) -> dict[str, Any]:
    groups = np.array([str(r.get(key)) for r in ref.rows])
    out = {}
    for g in sorted(set(groups)):
        s = groups == g
        k = cohen_kappa_score(ref.genuine[s], sigma[s]) if len(set(ref.genuine[s])) > 1 else None
        out[g] = {"n": int(s.sum()), "kappa": None if k is None else round(float(k), 3),
                  "rate": round(float(sigma[s].mean()), 3),
                  "ref_rate": round(float(ref.genuine[s].mean()), 3)}  # fmt: skip
    return out


def evaluate(name: str, both: Reference, fit: Fitter, repeats: int, n_train: int) -> dict[str, Any]:
    """All held-out figures of one judge recipe, keyed ``<name>_...``."""
    out: dict[str, Any] = {}
    runs = [predict(both, kfold(both, seed), fit) for seed in range(repeats)]
    cv = summarise(both, *runs[0])
    kappas = [cohen_kappa_score(both.genuine, s) for s, _ in runs]
    out[f"{name}_cv_kappa"] = round(float(np.mean(kappas)), 4)
    out[f"{name}_cv_kappa_ci"] = cv["kappa_ci"]
    out[f"{name}_cv_kappa_repeats"] = [round(float(k), 4) for k in kappas]
    out[f"{name}_cv_label_kappa"] = cv["label_kappa"]
    out[f"{name}_cv_rate"], out[f"{name}_cv_sensitivity"] = cv["rate"], cv["sensitivity"]
    out[f"{name}_cv_specificity"] = cv["specificity"]
    split = iter([(np.arange(n_train), np.arange(n_train, len(both.rows)))])
    dev = predict(both, split, fit)
    dev_ref = subset(both, np.arange(n_train, len(both.rows)))
    held = summarise(dev_ref, dev[0][n_train:], dev[1][n_train:])
    out[f"{name}_heldout_dev_kappa"], out[f"{name}_heldout_dev_kappa_ci"] = (
        held["kappa"], held["kappa_ci"])  # fmt: skip
    out[f"{name}_heldout_dev_label_kappa"] = held["label_kappa"]
    for key, tag in (("model", "lomo"), ("dataset", "lodo")):
        sigma, labels = predict(both, leave_one_out(both, key), fit)
        s = summarise(both, sigma, labels)
        out[f"{name}_{tag}_kappa"], out[f"{name}_{tag}_kappa_ci"] = s["kappa"], s["kappa_ci"]
        out[f"{name}_{tag}_label_kappa"] = s["label_kappa"]
        out[f"{name}_{tag}_groups"] = per_group(both, key, sigma)
    return out


def control(judge: Judge, name: str) -> dict[str, Any]:
    rows = [json.loads(line) for line in CONTROL.read_text().splitlines() if line.strip()]
    verdicts = judge.judge(inputs(rows))
    sigma = np.mean(
        [v.genuine == r["genuine_followup"] for v, r in zip(verdicts, rows, strict=True)]
    )
    label = np.mean([v.label == r["label"] for v, r in zip(verdicts, rows, strict=True)])
    misses = [
        f"{r['id']} -> {v.label}"
        for v, r in zip(verdicts, rows, strict=True)
        if v.label != r["label"]
    ]
    print(f"{name} control misses:\n  " + "\n  ".join(misses))
    return {f"{name}_control_accuracy": round(float(sigma), 4),
            f"{name}_control_label_accuracy": round(float(label), 4)}  # fmt: skip


def throughput(judge: Judge, rows: list[dict[str, Any]], batch: int = 64, passes: int = 5) -> float:
    """Turns/s over all rows, caches cleared first; the median of ``passes`` passes, since
    one pass on this shared VM ranges from about 430 to 750 turns/s."""
    items, rates = inputs(rows), []
    for _ in range(passes):
        _view.cache_clear()
        _extras.cache_clear()
        start = time.perf_counter()
        for i in range(0, len(items), batch):
            judge.judge(items[i : i + batch])
        rates.append(len(items) / (time.perf_counter() - start))
    return round(float(np.median(rates)), 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ref", type=Path, action="append", help="train file, then dev file")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-rules", action="store_true")
    args = parser.parse_args(argv)
    paths = args.ref or default_references()
    if any(not p.exists() for p in paths):
        print(f"error: reference files not found: {paths}", file=sys.stderr)
        return 2
    train = load_reference(paths[:1])
    both = load_reference(paths)
    out: dict[str, Any] = {"n": len(both.rows), "n_train": len(train.rows), "repeats": args.repeats}
    out |= evaluate("offline", both, fit_offline, args.repeats, len(train.rows))
    shipped = OfflineJudge(Spec(kind="offline", target="", raw="offline"))
    out |= control(shipped, "offline")
    control_rows = [json.loads(x) for x in CONTROL.read_text().splitlines() if x.strip()]
    out["offline_judge_turns_per_s"] = throughput(shipped, both.rows + control_rows)
    rules = RulesJudge(Spec(kind="rules", target="", raw="rules"))
    if not args.skip_rules:
        out |= evaluate("rules", both, fit_rules, args.repeats, len(train.rows))
    out |= control(rules, "rules")
    shipped_rules = predict(train, iter([(np.arange(0), np.arange(len(train.rows)))]),
                            lambda ref, idx: rules)  # fmt: skip
    out["rules_shipped_on_train_kappa"] = summarise(train, *shipped_rules)["kappa"]
    out["rules_judge_turns_per_s"] = throughput(rules, both.rows + control_rows)
    out["rules_thresholds_default"] = Thresholds().__dict__
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
