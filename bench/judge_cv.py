"""Cross-validated agreement of the rules judge with the reference labels.

The rules judge's thresholds are fit on ``../shared/judge_dev.jsonl``, so its agreement on
that same file is optimistic. This script reports the honest number: repeated stratified
5-fold cross-validation, where ``fit_thresholds`` sees only the training folds and the
held-out fold is scored with the thresholds it produced. It also reports the shipped
defaults on all of dev (in-sample), and the thresholds a fit on all of dev gives, which
should match the shipped defaults.

Run: ``.venv/bin/python bench/judge_cv.py [--dev PATH] [--repeats 10]``. The last line of
output is JSON: ``rules_cv_kappa`` (mean ± ``rules_cv_kappa_std`` over held-out folds),
``rules_cv_label_acc``, ``rules_insample_kappa`` and friends.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import cohen_kappa_score
from sklearn.model_selection import RepeatedStratifiedKFold

from userturn.judges.rules import Thresholds, classify, fit_thresholds
from userturn.judges.rules_features import TextFeatures, measure

DEV = Path(__file__).resolve().parents[1].parent / "shared" / "judge_dev.jsonl"
GENUINE = "plausible_followup"


def load(path: Path) -> tuple[list[TextFeatures], np.ndarray, np.ndarray]:
    """Features, σ and labels per row; only ``messages`` and ``user_turn`` are used."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    feats = [measure(r["messages"], r["user_turn"]) for r in rows]
    genuine = np.array([bool(r["genuine_followup"]) for r in rows])
    labels = np.array([r["label"] for r in rows])
    return feats, genuine, labels


def predict(feats: list[TextFeatures], t: Thresholds) -> np.ndarray:
    return np.array([classify(f, t)[0] for f in feats])


def cross_validate(
    feats: list[TextFeatures], genuine: np.ndarray, labels: np.ndarray, repeats: int
) -> dict[str, Any]:
    """Per-fold κ and label accuracy, thresholds fit on the other four folds only."""
    cv = RepeatedStratifiedKFold(n_splits=5, n_repeats=repeats, random_state=0)
    kappas, accs, pooled = [], [], []
    oof = np.empty(len(feats), dtype=object)
    for fold, (train, test) in enumerate(cv.split(np.zeros(len(genuine)), genuine)):
        t = fit_thresholds([feats[i] for i in train], genuine[train].tolist())
        pred = predict([feats[i] for i in test], t)
        oof[test] = pred
        kappas.append(cohen_kappa_score(genuine[test], pred == GENUINE))
        accs.append(float(np.mean(pred == labels[test])))
        if fold % 5 == 4:  # one repeat done: every row has an out-of-fold verdict
            pooled.append(cohen_kappa_score(genuine, oof == GENUINE))
    return {
        "rules_cv_kappa": float(np.mean(kappas)),
        "rules_cv_kappa_std": float(np.std(kappas)),
        "rules_cv_kappa_pooled": float(np.mean(pooled)),
        "rules_cv_label_acc": float(np.mean(accs)),
        "last_repeat_oof": oof,
    }


def confusion(labels: np.ndarray, pred: np.ndarray) -> str:
    """Reference → predicted counts, off-diagonal only, most frequent first."""
    pairs = Counter((a, b) for a, b in zip(labels, pred, strict=True) if a != b)
    return "\n".join(f"  {n:3d}  {a} -> {b}" for (a, b), n in pairs.most_common())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    if not args.dev.exists():
        print(f"error: {args.dev} not found (shared/ must be the repo's sibling)", file=sys.stderr)
        return 2
    feats, genuine, labels = load(args.dev)
    cv = cross_validate(feats, genuine, labels, args.repeats)
    shipped = predict(feats, Thresholds())
    refit = fit_thresholds(feats, genuine.tolist())
    print(f"dev rows: {len(feats)}, genuine: {int(genuine.sum())}")
    print(f"shipped thresholds: {asdict(Thresholds())}")
    print(f"refit on all dev:   {asdict(refit)}" + ("" if refit == Thresholds() else "  (DIFFERS)"))
    print("in-sample errors (shipped thresholds):\n" + confusion(labels, shipped))
    print("out-of-fold errors (last repeat):\n" + confusion(labels, cv.pop("last_repeat_oof")))
    summary = {
        **{k: round(v, 4) for k, v in cv.items()},
        "rules_insample_kappa": round(float(cohen_kappa_score(genuine, shipped == GENUINE)), 4),
        "rules_insample_label_acc": round(float(np.mean(shipped == labels)), 4),
        "n": len(feats),
        "repeats": args.repeats,
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
