"""What a cut of its own for people's turns would buy the offline judge, and what it costs.

On the 600 held-back turns people typed, the offline judge finds 72% of the genuine
follow-ups and calls 63.5% genuine where the reviewers say 78.7%. A lower cut on
P(genuine) meets both of people's targets (sensitivity 0.85, judged rate within 8
points) but costs the other styles, so the question is whether the judge can tell
people's turns apart well enough to lower the cut for them alone. This bench bounds the
answer from both sides on the same verdicts:

- **Verdicts.** ``judge_prior_shift.judge_views``: the 1,314 fit turns judged out of
  fold (each by the recipe re-fit without its conversation, at that fold's own cut), the
  600 held-back people's turns by the shipped judge. Gated verdicts never move.
- **Oracle route.** The cut T applies to the turns people typed and to no other: what a
  perfect detector would give.
- **Detector route.** The cut T applies where a detector of people's turns scores at
  least D. The detector is extremely randomised trees (300, leaves of 2, balanced
  classes) over the judge's own hand-made features and paraphrase similarities; people's
  turns are the 222 in the fit plus ``UNLABELLED`` first-exchange next turns of ShareGPT
  chats that no reference file uses (English, request under 1,500 and answer under 3,000
  characters, as the human files were drawn); the other side is small models' output
  and the written model-like turns. Fit turns are scored out of fold on the judge's own
  folds, so no conversation is scored by a detector that saw it; the held-back turns by
  the detector fit on everything.
- **Figures.** Per policy: κ on σ for small models' output, the written model-like and
  human-like turns and the whole realistic file; on the held-back people, sensitivity,
  judged rate and κ. ``feasible`` lists the grid points that meet people's two targets
  and keep both written styles at κ ≥ 0.65, the realistic file at ≥ 0.75 and small
  models' output within ``MODEL_SLACK`` of the fitted cut. The grid is read off the
  held-back turns themselves, so a feasible point would be optimistic; an empty list is
  the finding.

Run: ``.venv/bin/python bench/judge_people_cut.py`` (about 80 s on two idle cores).
The last line is one JSON object, keys prefixed ``people_cut_``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.ensemble import ExtraTreesClassifier
from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parent))
from judge_prior_shift import judge_views, kappa

from userturn.datasets import load_dataset
from userturn.judges import protocol
from userturn.judges.offline_fit import FOLDS, SEED, Reference, measure_rows

UNLABELLED = 3000
CUTS = (0.15, 0.2, 0.25, 0.3, 0.4)
DETECTOR_CUTS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
MODEL_SLACK = 0.02
PEOPLE = ("real_human",)
MACHINE = ("model_output", "written_model_like")


def english(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    return bool(letters) and sum(c.isascii() for c in letters) / len(letters) > 0.97


def unlabelled_people(used: set[str]) -> list[dict[str, Any]]:
    """First-exchange next turns of ShareGPT chats no reference file quotes (seeded)."""
    out = []
    for item in load_dataset("sharegpt").load():
        messages, turn = list(item.messages), str(item.reference_turn or "")
        if len(messages) != 2 or not turn.strip():
            continue
        q, a = (str(m["content"]) for m in messages)
        if len(q) > 1500 or len(a) > 3000 or not english(q + a + turn):
            continue
        if protocol.context_group(messages) not in used:
            out.append({"messages": messages, "user_turn": turn})
    order = np.random.default_rng(SEED).permutation(len(out))[:UNLABELLED]
    return [out[i] for i in order]


def features(rows: list[dict[str, Any]]) -> np.ndarray:
    """The judge's hand-made features and paraphrase similarities (``Reference.x``,
    ``Reference.sims``)."""
    x, sims, _ = measure_rows(rows)
    return np.hstack([x, sims])


def trees() -> ExtraTreesClassifier:
    return ExtraTreesClassifier(
        n_estimators=300, min_samples_leaf=2, class_weight="balanced", random_state=SEED,
        n_jobs=1,
    )  # fmt: skip


def detector(
    ref: Reference, styles: np.ndarray, held: Reference, extra: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """P(typed by a person) for the fit turns (out of fold) and the held-back ones."""
    x, y = np.hstack([ref.x, ref.sims]), np.isin(styles, PEOPLE)
    known = y | np.isin(styles, MACHINE)
    oof = np.zeros(len(ref.rows))
    for train, test in protocol.folds(ref.rows, ref.genuine, FOLDS, SEED):
        part = train[known[train]]
        model = trees().fit(np.vstack([x[part], extra]), np.r_[y[part], np.ones(len(extra))])
        oof[test] = model.predict_proba(x[test])[:, 1]
    model = trees().fit(np.vstack([x[known], extra]), np.r_[y[known], np.ones(len(extra))])
    return oof, model.predict_proba(np.hstack([held.x, held.sims]))[:, 1]


def auc_apart(people: np.ndarray, others: np.ndarray) -> float:
    """ROC AUC of the detector for the held-back people's turns against other turns."""
    truth = np.r_[np.ones(len(people)), np.zeros(len(others))]
    return round(float(roc_auc_score(truth, np.r_[people, others])), 3)


def moved(v: dict[str, np.ndarray], cut: np.ndarray) -> np.ndarray:
    """σ with each free turn's cut replaced (gated verdicts keep theirs)."""
    return np.where(v["free"], v["p"] >= cut, v["sigma"])


def outcome(
    ref: Reference,
    styles: np.ndarray,
    held: Reference,
    fit_sigma: np.ndarray,
    held_sigma: np.ndarray,
) -> dict[str, float]:
    """κ per style and on the realistic file; sensitivity, judged rate and κ held back."""
    realistic = ref.file_of == protocol.REALISTIC_FILE
    out = {s: kappa(ref.genuine[styles == s], fit_sigma[styles == s]) for s in protocol.STYLES}
    out["realistic"] = kappa(ref.genuine[realistic], fit_sigma[realistic])
    truth = held.genuine
    out |= {
        "held_sensitivity": float(held_sigma[truth].mean()),
        "held_judged": float(held_sigma.mean()),
        "held_kappa": kappa(truth, held_sigma),
    }
    return {k: round(v, 3) for k, v in out.items()}


def feasible(row: dict[str, float], base: dict[str, float], reviewers: float) -> bool:
    return (
        row["held_sensitivity"] >= 0.85
        and abs(row["held_judged"] - reviewers) <= 0.08
        and min(row["written_model_like"], row["written_human_like"]) >= 0.65
        and row["realistic"] >= 0.75
        and row["model_output"] >= base["model_output"] - MODEL_SLACK
    )


def main() -> int:
    views = judge_views()
    ref, held, fit, back = views.ref, views.held, views.fit, views.back
    styles = protocol.styles(ref.rows)
    extra = features(unlabelled_people(set(ref.groups.tolist()) | set(held.groups.tolist())))
    d_fit, d_held = detector(ref, styles, held, extra)
    people = np.isin(styles, PEOPLE)
    reviewers = float(held.genuine.mean())
    base = outcome(ref, styles, held, fit["sigma"], back["sigma"])
    out: dict[str, Any] = {
        "fitted_cut": views.shipped.threshold,
        "reviewers_rate": round(reviewers, 3),
    }
    out["base"] = base
    out["detector_auc"] = {
        s: auc_apart(d_held, d_fit[styles == s]) for s in (*MACHINE, "written_human_like")
    }
    out["one_cut"] = {
        f"{t:g}": outcome(ref, styles, held, moved(fit, np.full(len(ref.rows), t)), moved(back, t))
        for t in CUTS
    }
    out["oracle"] = {
        f"{t:g}": outcome(
            ref, styles, held, moved(fit, np.where(people, t, fit["cut"])), moved(back, t)
        )
        for t in CUTS
    }
    out["detector"] = {
        f"D{d:g}_T{t:g}": outcome(
            ref,
            styles,
            held,
            moved(fit, np.where(d_fit >= d, t, fit["cut"])),
            moved(back, np.where(d_held >= d, t, back["cut"])),
        )
        for d in DETECTOR_CUTS
        for t in CUTS
    }
    out["feasible"] = {
        route: [k for k, row in out[route].items() if feasible(row, base, reviewers)]
        for route in ("one_cut", "oracle", "detector")
    }
    print(json.dumps(out, indent=1), file=sys.stderr)
    print(json.dumps({f"people_cut_{k}": v for k, v in out.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
