"""Honest agreement of the offline judge with the reference labels, by the shared protocol.

Every figure comes from turns the scoring model was not fit on, and the whole recipe
(act head, its out-of-fold stacking, forests, calibration, threshold) is re-fit inside
every split (``userturn.judges.protocol``):

- ``offline_cv_*``: grouped 5-fold CV over every turn the judge is fit on (train + dev +
  realistic + human, 1,314): no conversation in two folds. ``_repeats`` gives κ for each
  fold seed; CIs are percentile bootstraps over turns (2,000 resamples) of the first
  seed's verdicts.
- ``offline_cv_style`` / ``_dataset`` / ``_file``: the first seed's verdicts per stratum.
- ``offline_transfer_*``: fit on the small-model files, score judge_realistic; and back;
  and fit on every other file, score judge_human.
- ``offline_lodo_*``: leave one dataset out (pooled over the held-out datasets).
- ``offline_heldout_human``: the shipped judge on ``judge_human_heldout.jsonl``, 600
  real next turns people typed, labelled like ``judge_human.jsonl`` and never fit on
  (``rules_heldout_human``: the rules judge on them; ``_dataset``: by source).
- ``offline_control_*``: the shipped judge on tests/judges/fixtures/control_set.jsonl.
- ``offline_judge_turns_per_s``: the shipped judge over every reference and control turn
  in batches of 64, every cache cleared first (so each context's embeddings are computed
  once per pass, as in a run); the median of 5 passes.
- ``rules_*``: the shipped rules judge, unchanged, on the same turns (a baseline).

Run: ``.venv/bin/python bench/judge_offline.py [--repeats 1]`` (about 15 minutes on two
idle cores); the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import cohen_kappa_score

from userturn.judges import protocol
from userturn.judges.base import Judge
from userturn.judges.offline import OfflineJudge, Params
from userturn.judges.offline_features import _extras
from userturn.judges.offline_fit import (
    Reference,
    default_references,
    fit_arrays,
    heldout_reference,
    load_reference,
)
from userturn.judges.offline_meaning import _context
from userturn.judges.rules import RulesJudge
from userturn.judges.rules_features import _view
from userturn.spec import Spec
from userturn.types import JudgeInput

REPO = Path(__file__).resolve().parents[1]
CONTROL = REPO / "tests" / "judges" / "fixtures" / "control_set.jsonl"
Split = tuple[np.ndarray, np.ndarray]
OFFLINE = Spec(kind="offline", target="", raw="offline")


def inputs(rows: list[dict[str, Any]]) -> list[JudgeInput]:
    return [JudgeInput.of_row(r) for r in rows]


def verdicts_of(judge: Judge, rows: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """σ and labels of ``judge`` on ``rows``, as arrays."""
    verdicts = judge.judge(inputs(rows))
    sigma = np.array([bool(v.genuine) for v in verdicts], dtype=bool)
    return sigma, np.array([str(v.label) for v in verdicts], dtype=object)


def fit_offline(ref: Reference, train: np.ndarray) -> Judge:
    return OfflineJudge(OFFLINE, params=Params.from_json(fit_arrays(ref.take(train))))


def predict(
    ref: Reference, splits: Iterable[Split], fit: Callable[[Reference, np.ndarray], Judge]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Out-of-split σ and labels, and which rows were scored."""
    sigma = np.zeros(len(ref.rows), dtype=bool)
    labels = np.full(len(ref.rows), "", dtype=object)
    scored = np.zeros(len(ref.rows), dtype=bool)
    for train, test in splits:
        sigma[test], labels[test] = verdicts_of(fit(ref, train), [ref.rows[i] for i in test])
        scored[test] = True
    return sigma, labels, scored


def kappa_ci(y: np.ndarray, pred: np.ndarray, n_boot: int = 2000) -> list[float]:
    """A percentile bootstrap CI of κ over turns (seeded)."""
    rng = np.random.default_rng(0)
    boots = [cohen_kappa_score(y[i], pred[i]) for i in rng.integers(0, len(y), (n_boot, len(y)))]
    lo, hi = np.nanpercentile(boots, [2.5, 97.5])
    return [round(float(lo), 4), round(float(hi), 4)]


def summarise(
    genuine: np.ndarray, labels: np.ndarray, sigma: np.ndarray, pred: np.ndarray
) -> dict[str, Any]:
    both = len(set(genuine.tolist())) > 1
    return {
        "n": len(genuine),
        "kappa": round(float(cohen_kappa_score(genuine, sigma)), 4) if both else None,
        "kappa_ci": kappa_ci(genuine, sigma) if both else None,
        "label_kappa": round(float(cohen_kappa_score(labels, pred.astype(str))), 4),
        "rate": round(float(sigma.mean()), 4),
        "ref_rate": round(float(genuine.mean()), 4),
        "sensitivity": round(float(sigma[genuine].mean()), 4) if genuine.any() else None,
        "specificity": round(float(1 - sigma[~genuine].mean()), 4) if (~genuine).any() else None,
    }


def per_stratum(
    ref: Reference, values: np.ndarray, sigma: np.ndarray, pred: np.ndarray
) -> dict[str, Any]:
    return {
        g: summarise(ref.genuine[values == g], ref.labels[values == g], sigma[values == g],
                     pred[values == g])
        for g in sorted(set(values.tolist()))
    }  # fmt: skip


def scored_summary(
    ref: Reference, out: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> dict[str, Any]:
    sigma, pred, s = out
    return summarise(ref.genuine[s], ref.labels[s], sigma[s], pred[s])


def evaluate(ref: Reference, repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    styles = protocol.styles(ref.rows)
    datasets = np.array([str(r.get("dataset")) for r in ref.rows])
    runs = [
        predict(ref, protocol.folds(ref.rows, ref.genuine, seed=s), fit_offline)
        for s in range(repeats)
    ]
    sigma, pred, _ = runs[0]
    out["offline_cv"] = scored_summary(ref, runs[0])
    out["offline_cv_kappa"] = out["offline_cv"]["kappa"]
    out["offline_cv_repeats"] = [
        round(float(cohen_kappa_score(ref.genuine, r[0])), 4) for r in runs
    ]
    out["offline_cv_style"] = per_stratum(ref, styles, sigma, pred)
    out["offline_cv_dataset"] = per_stratum(ref, datasets, sigma, pred)
    out["offline_cv_file"] = per_stratum(ref, ref.file_of, sigma, pred)
    print("cv", json.dumps(out["offline_cv"]), flush=True)
    for name, split in protocol.transfer(ref.file_of).items():
        result = predict(ref, [split], fit_offline)
        out[f"offline_transfer_{name}"] = scored_summary(ref, result)
        s = result[2]
        out[f"offline_transfer_{name}_style"] = per_stratum(
            ref.take(np.flatnonzero(s)), styles[s], result[0][s], result[1][s]
        )
        print(name, json.dumps(out[f"offline_transfer_{name}"]), flush=True)
    lodo = predict(ref, protocol.leave_one_out(datasets), fit_offline)
    out["offline_lodo"] = scored_summary(ref, lodo)
    out["offline_lodo_dataset"] = per_stratum(ref, datasets, lodo[0], lodo[1])
    print("lodo", json.dumps(out["offline_lodo"]), flush=True)
    return out


def rules_baseline(ref: Reference) -> dict[str, Any]:
    sigma, pred = verdicts_of(RulesJudge(Spec(kind="rules", target="", raw="rules")), ref.rows)
    styles = protocol.styles(ref.rows)
    return {"rules_all": summarise(ref.genuine, ref.labels, sigma, pred),
            "rules_style": per_stratum(ref, styles, sigma, pred)}  # fmt: skip


def control(judge: Judge) -> dict[str, Any]:
    rows = [json.loads(line) for line in CONTROL.read_text().splitlines() if line.strip()]
    verdicts = judge.judge(inputs(rows))
    pairs = list(zip(verdicts, rows, strict=True))
    misses = [
        f"{r['id']} -> {v.genuine}/{v.label}"
        for v, r in pairs
        if v.genuine != r["genuine_followup"]
    ]
    print("control σ misses:\n  " + "\n  ".join(misses), flush=True)
    sigma = np.mean([v.genuine == r["genuine_followup"] for v, r in pairs])
    label = np.mean([v.label == r["label"] for v, r in pairs])
    return {
        "offline_control_n": len(rows),
        "offline_control_accuracy": round(float(sigma), 4),
        "offline_control_label_accuracy": round(float(label), 4),
        "offline_control_sigma_misses": misses,
    }


def heldout(judge: Judge, name: str, part: Reference) -> dict[str, Any]:
    """A judge on the held-out human turns (``protocol.HELDOUT_FILE``)."""
    sigma, pred = verdicts_of(judge, part.rows)
    out = summarise(part.genuine, part.labels, sigma, pred)
    print(name, "heldout", json.dumps(out), flush=True)
    sources = np.array([str(r.get("dataset")) for r in part.rows])
    return {
        f"{name}_heldout_human": out,
        f"{name}_heldout_human_dataset": per_stratum(part, sources, sigma, pred),
    }


def throughput(judge: Judge, rows: list[dict[str, Any]], batch: int = 64, passes: int = 5) -> float:
    """Turns/s over all rows, every cache cleared first; the median of ``passes`` passes."""
    items, rates = inputs(rows), []
    for _ in range(passes):
        _view.cache_clear()
        _extras.cache_clear()
        _context.cache_clear()
        start = time.perf_counter()
        for i in range(0, len(items), batch):
            judge.judge(items[i : i + batch])
        rates.append(len(items) / (time.perf_counter() - start))
    return round(float(np.median(rates)), 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ref", type=Path, action="append", help="reference file (repeat)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--speed-only", action="store_true")
    args = parser.parse_args(argv)
    paths = args.ref or default_references()
    if any(not p.exists() for p in paths):
        print(f"error: reference files not found: {paths}", file=sys.stderr)
        return 2
    ref = load_reference(paths)
    shipped = OfflineJudge(OFFLINE)
    out: dict[str, Any] = {"n": len(ref.rows), "offline_version": shipped.version}
    control_rows = [json.loads(x) for x in CONTROL.read_text().splitlines() if x.strip()]
    out["offline_judge_turns_per_s"] = throughput(shipped, ref.rows + control_rows)
    print("turns/s", out["offline_judge_turns_per_s"], flush=True)
    out |= control(shipped)
    held = load_reference([heldout_reference()])
    out |= heldout(shipped, "offline", held)
    out |= heldout(RulesJudge(Spec(kind="rules", target="", raw="rules")), "rules", held)
    if not args.speed_only:
        out |= evaluate(ref, args.repeats)
        out |= rules_baseline(ref)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
