"""Re-fit the offline judge from the reference files, reproducibly.

Run: ``python -m userturn.judges.offline_fit [--ref FILE ...] [--out PATH]``. By default
it reads ``judge_train.jsonl`` and ``judge_dev.jsonl`` from ``shared/`` (``$USERTURN_SHARED``
or beside the repository) and rewrites the shipped ``offline_params.json``. The same
files and scikit-learn version give byte-identical parameters: every random choice is
seeded and the forests are grown on one thread.

The recipe, and why:

- **σ model**: a random forest (200 trees, leaves of >= 3 turns). On judge_train's
  cross-validation it beat logistic regression (κ 0.54 vs 0.36) and gradient boosting
  (0.50): the evidence interacts (overlap with the request means a re-ask only when no
  new question word comes with it), which a linear model cannot express.
- **Calibration and threshold**: 5-fold out-of-fold forest scores on the fitting rows
  are Platt-scaled into P(genuine), and the threshold is the one that maximises κ on
  those out-of-fold probabilities (the median of tied best values). The held-out rows
  of a cross-validation never enter either.
- **Label model**: a second forest over the degenerate labels with at least
  ``MIN_LABEL_ROWS`` reference turns; rarer labels (``degenerate_short``,
  ``meta_planning``) come from the judge's gates only.

Only ``messages`` and ``user_turn`` are read as inputs, so no metadata leaks in.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections import Counter
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import sklearn
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import cohen_kappa_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict

from userturn.errors import UserError
from userturn.judges.base import Judge
from userturn.judges.card import build_card, file_entry, reference_rows, write_card
from userturn.judges.offline import FORMAT, PARAMS, OfflineJudge, Params
from userturn.judges.offline_features import NAMES, measure_turn
from userturn.judges.offline_forest import forest_to_json
from userturn.judges.rules import RulesJudge
from userturn.spec import Spec
from userturn.types import JudgeInput, Judgment

log = logging.getLogger(__name__)

SEED = 0
N_TREES = 200
MIN_LEAF = 3
FOLDS = 5
MIN_LABEL_ROWS = 3
GENUINE = "plausible_followup"
REFERENCE_FILES = ("judge_train.jsonl", "judge_dev.jsonl")
CONTROL = (
    Path(__file__).resolve().parents[3] / "tests" / "judges" / "fixtures" / "control_set.jsonl"
)
"""The planted control set lives with the tests; cards are written from a checkout."""


@dataclass(frozen=True)
class Reference:
    """Reference rows with their features, σ and labels, and where they came from."""

    rows: list[dict[str, Any]]
    x: np.ndarray
    genuine: np.ndarray
    labels: np.ndarray
    files: list[dict[str, Any]]


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a reference file; a row without the needed fields is a ``UserError``."""
    return [row for _, row in reference_rows(path)]


def load_reference(paths: list[Path]) -> Reference:
    rows, files = [], []
    for path in paths:
        part = read_rows(path)
        rows += part
        files.append(file_entry(path, len(part)))
    return Reference(
        rows=rows,
        x=np.array([measure_turn(r["messages"], r["user_turn"]).vector() for r in rows]),
        genuine=np.array([bool(r["genuine_followup"]) for r in rows]),
        labels=np.array([str(r["label"]) for r in rows]),
        files=files,
    )


def _forest() -> RandomForestClassifier:
    return RandomForestClassifier(
        n_estimators=N_TREES, min_samples_leaf=MIN_LEAF, random_state=SEED, n_jobs=1
    )


def best_threshold(p: np.ndarray, genuine: np.ndarray) -> float:
    """The κ-maximising cut on a 0.01 grid (median of ties: the middle of a plateau)."""
    grid = np.round(np.arange(0.15, 0.851, 0.01), 2)
    kappas = np.array([cohen_kappa_score(genuine, p >= t) for t in grid])
    tied = grid[np.isclose(kappas, kappas.max())]
    return float(tied[len(tied) // 2])


def fit_sigma(x: np.ndarray, genuine: np.ndarray) -> dict[str, Any]:
    """Forest, Platt scaling and threshold (see the module docstring)."""
    folds = StratifiedKFold(FOLDS, shuffle=True, random_state=SEED)
    oof = cross_val_predict(_forest(), x, genuine, cv=folds, method="predict_proba")[:, 1]
    platt = LogisticRegression(C=1e6, max_iter=1000).fit(oof.reshape(-1, 1), genuine)
    a, b = float(platt.coef_[0, 0]), float(platt.intercept_[0])
    p = 1.0 / (1.0 + np.exp(-(a * oof + b)))
    forest = _forest().fit(x, genuine)
    return {
        "forest": forest_to_json(forest.estimators_, 2),
        "platt": [round(a, 6), round(b, 6)],
        "threshold": best_threshold(p, genuine),
    }


def fit_labels(x: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """A forest over the degenerate labels that have enough reference turns."""
    counts = Counter(labels[labels != GENUINE].tolist())
    classes = sorted(label for label, n in counts.items() if n >= MIN_LABEL_ROWS)
    keep = np.isin(labels, classes)
    forest = _forest().fit(x[keep], labels[keep])
    order = [list(forest.classes_).index(c) for c in classes]
    data = forest_to_json(forest.estimators_, len(classes))
    data["value"] = [[v[i] for i in order] for v in data["value"]]
    return {"classes": classes, "forest": data}


def fit_arrays(x: np.ndarray, genuine: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """The model part of the parameters, from feature rows (used by cross-validation)."""
    return {
        "format": FORMAT,
        "features": list(NAMES),
        "sigma": fit_sigma(x, genuine),
        "labels": fit_labels(x, labels),
    }


def fit_params(ref: Reference) -> dict[str, Any]:
    """The full parameter file: the model plus what it was fit on and how."""
    params = fit_arrays(ref.x, ref.genuine, ref.labels)
    params["fit"] = {
        "references": ref.files,
        "n": len(ref.rows),
        "genuine": int(ref.genuine.sum()),
        "learner": f"sklearn {sklearn.__version__} RandomForestClassifier",
        "n_estimators": N_TREES,
        "min_samples_leaf": MIN_LEAF,
        "seed": SEED,
        "folds": FOLDS,
    }
    return params


class CrossFitJudge(Judge):
    """The offline judge, but each reference turn is judged by a model fit without it.

    A card built through this judge reports out-of-fold agreement of the fitting recipe,
    which is what the shipped model can be expected to do on new turns; turns that are not
    reference rows (the control set) go to the shipped model itself.
    """

    def __init__(self, ref: Reference, shipped: OfflineJudge, folds: int = FOLDS) -> None:
        super().__init__(shipped.spec)
        self.version = shipped.version
        self._shipped = shipped
        self._fold: dict[tuple[str, str], int] = {}
        self._judges: list[Judge] = []
        split = StratifiedKFold(folds, shuffle=True, random_state=SEED)
        for k, (train, test) in enumerate(split.split(ref.x, ref.genuine)):
            params = fit_arrays(ref.x[train], ref.genuine[train], ref.labels[train])
            self._judges.append(OfflineJudge(shipped.spec, params=Params.from_json(params)))
            self._fold |= {_key(ref.rows[i]["id"], ref.rows[i]["user_turn"]): k for i in test}

    def judge(self, inputs: list[JudgeInput]) -> list[Judgment]:
        out: list[Judgment | None] = [None] * len(inputs)
        for k, judge in [*enumerate(self._judges), (-1, self._shipped)]:
            todo = [i for i, x in enumerate(inputs) if self._fold_of(x) == k]
            for i, verdict in zip(todo, judge.judge([inputs[i] for i in todo]), strict=True):
                out[i] = verdict
        return [v for v in out if v is not None]

    def _fold_of(self, item: JudgeInput) -> int:
        return self._fold.get(_key(item.id, item.user_turn), -1)


def _key(row_id: str, turn: str) -> tuple[str, str]:
    return (row_id, turn)


CROSS_FIT_METHOD = (
    f"{FOLDS}-fold cross-fitted (out-of-fold): each reference turn was judged by a model"
    " fit by the same recipe on the other folds, never by a model that saw it; the"
    " control set was judged by the shipped model"
)
RULES_METHOD = (
    "the shipped rules judge; its thresholds were fit on judge_dev.jsonl only, so the"
    " card is measured on judge_train.jsonl, which it never saw"
)


def write_cards(ref: Reference, paths: list[Path], control: Path, folder: Path) -> list[Path]:
    """The shipped cards: ``offline`` cross-fitted on every file, ``rules`` held out."""
    spec = Spec(kind="offline", target="", raw="offline")
    shipped = OfflineJudge(spec, params=Params.from_json(json.loads(default_output().read_text())))
    offline = build_card(CrossFitJudge(ref, shipped), paths, control, CROSS_FIT_METHOD)
    rules = RulesJudge(Spec(kind="rules", target="", raw="rules"))
    train = [p for p in paths if p.name == REFERENCE_FILES[0]]
    cards = [offline, build_card(rules, train, control, RULES_METHOD)]
    return [write_card(card, folder) for card in cards]


def default_references() -> list[Path]:
    """``shared/`` from ``$USERTURN_SHARED``, else beside the repository checkout."""
    env = os.environ.get("USERTURN_SHARED")
    shared = Path(env) if env else Path(__file__).resolve().parents[4] / "shared"
    return [shared / name for name in REFERENCE_FILES]


def default_output() -> Path:
    return Path(__file__).resolve().with_name(PARAMS)


def dumps(params: dict[str, Any]) -> str:
    """Stable JSON: sorted keys, compact arrays, one trailing newline."""
    return json.dumps(params, sort_keys=True, separators=(",", ":")) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ref", type=Path, action="append", help="reference file (repeat)")
    parser.add_argument("--out", type=Path, default=default_output())
    parser.add_argument("--cards", type=Path, help="also write the shipped cards here")
    args = parser.parse_args(argv)
    paths = args.ref or default_references()
    try:
        ref = load_reference(paths)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    params = fit_params(ref)
    args.out.write_text(dumps(params), encoding="utf-8")
    if args.cards:
        for path in write_cards(ref, paths, CONTROL, args.cards):
            print(f"card -> {path}")
    sigma = params["sigma"]
    print(
        f"{date.today()}: fit on {len(ref.rows)} turns ({int(ref.genuine.sum())} genuine);"
        f" threshold {sigma['threshold']}, Platt {sigma['platt']};"
        f" labels {params['labels']['classes']} -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
