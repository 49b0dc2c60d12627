"""The table of examples/measures-local.sh: judged rate, GF@k, likelihood and challenges.

Usage: ``.venv/bin/python examples/measures_summary.py runs/measures-local``. Prints a
Markdown table (one row per model x held-out dataset, plus the injection control per
model) and the Spearman correlation, over models x datasets, between the likelihood
probe (real turn preferred; margin) and the judged rate. Writes ``summary.json`` beside.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from scipy.stats import spearmanr

from userturn.analysis.intervals import wilson

JUDGE = "offline"


def cells(run: Path) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads((run / "summary.json").read_text())["cells"]
    return data


def pct(x: float | None, lo: float | None = None, hi: float | None = None) -> str:
    if x is None:
        return "–"
    if lo is None or hi is None:
        return f"{100 * x:.1f}%"
    return f"{100 * x:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def rows(root: Path) -> list[dict[str, Any]]:
    out = []
    for model_dir in sorted(p for p in root.iterdir() if (p / "judged").is_dir()):
        judged = {c["dataset"]: c for c in cells(model_dir / "judged") if c["judge"] == JUDGE}
        lik = {
            c["dataset"]: c for c in cells(model_dir / "likelihood") if c["probe"] == "likelihood"
        }
        for ds, c in judged.items():
            lc = lik.get(ds, {})
            out.append(
                {
                    "model": model_dir.name,
                    "dataset": ds,
                    "n": c["n"],
                    "rate": c["rate"],
                    "rate_ci": (c["ci_low"], c["ci_high"]),
                    "corrected": c.get("rate_corrected"),
                    "corrected_ci": (c.get("ci_corrected_low"), c.get("ci_corrected_high")),
                    "gf_at_k": c.get("gf_at_k") or {},
                    "contexts": lc.get("n"),
                    "preferred": lc.get("preference_accuracy"),
                    "preferred_ci": (lc.get("preference_ci_low"), lc.get("preference_ci_high")),
                    "margin": lc.get("margin"),
                    "margin_ci": (lc.get("margin_ci_low"), lc.get("margin_ci_high")),
                }
            )
    return out


def injection(root: Path) -> list[dict[str, Any]]:
    out = []
    for model_dir in sorted(p for p in root.iterdir() if (p / "inject").is_dir()):
        by_pert = {c["perturbation"]: c for c in cells(model_dir / "inject") if c["judge"] == JUDGE}
        none, inj = by_pert.get("none", {}), by_pert.get("inject-error", {})
        out.append(
            {
                "model": model_dir.name,
                "accuracy": none.get("accuracy"),
                "challenge_none": _challenges(none),
                "challenge_injected": _challenges(inj),
                "rate_none": (none.get("rate"), none.get("ci_low"), none.get("ci_high")),
                "rate_injected": (inj.get("rate"), inj.get("ci_low"), inj.get("ci_high")),
                "n": (none.get("n"), inj.get("n")),
                "not_applied": inj.get("n_not_applied"),
            }
        )
    return out


def _challenges(cell: dict[str, Any]) -> tuple[float | None, float | None, float | None]:
    """The challenge rate with a Wilson CI over its turns (samples of an item treated as
    independent, so the interval is somewhat narrow at k > 1)."""
    rate, n = cell.get("challenge_rate"), cell.get("challenge_n") or 0
    if rate is None or not n:
        return (None, None, None)
    lo, hi = wilson(round(rate * n), n)
    return (rate, lo, hi)


def _rho(x: list[float], y: list[float]) -> list[float] | str:
    if len(set(x)) < 2 or len(set(y)) < 2:
        return "undefined: one side is constant"
    res = spearmanr(x, y)
    return [round(float(res[0]), 3), round(float(res[1]), 3)]


def main(root: Path) -> None:
    table = rows(root)
    head = ["model", "dataset", "judged rate [95% CI]", "corrected [95% CI]", "GF@1", "GF@2"]
    head += ["GF@4", "real turn preferred [95% CI]", "margin [95% CI]"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in table:
        gf = r["gf_at_k"]
        m, (mlo, mhi) = r["margin"], r["margin_ci"]
        margin = "–" if m is None else f"{m:+.2f} [{mlo:+.2f}, {mhi:+.2f}]"
        print(
            f"| {r['model']} | {r['dataset']} | {pct(r['rate'], *r['rate_ci'])} "
            f"| {pct(r['corrected'], *r['corrected_ci'])} "
            f"| {pct(gf.get('1'))} | {pct(gf.get('2'))} | {pct(gf.get('4'))} "
            f"| {pct(r['preferred'], *r['preferred_ci'])} | {margin} |"
        )
    pairs = [(r["preferred"], r["margin"], r["rate"]) for r in table if r["margin"] is not None]
    rates = [p[2] for p in pairs]
    corr = {
        "points": len(pairs),
        "spearman_preferred_vs_rate [rho, p]": _rho([p[0] for p in pairs], rates),
        "spearman_margin_vs_rate [rho, p]": _rho([p[1] for p in pairs], rates),
    }
    print(f"\nSpearman over {len(pairs)} model x dataset points: {corr}")
    inj = injection(root)
    head = ["model", "accuracy", "challenges (none)", "challenges (inject-error)"]
    head += ["rate none", "rate injected", "n", "not applied"]
    print("\n| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in inj:
        print(
            f"| {r['model']} | {pct(r['accuracy'])} | {pct(*r['challenge_none'])} "
            f"| {pct(*r['challenge_injected'])} | {pct(*r['rate_none'])} "
            f"| {pct(*r['rate_injected'])} "
            f"| {r['n'][0]}/{r['n'][1]} | {r['not_applied']} |"
        )
    (root / "summary.json").write_text(
        json.dumps({"rows": table, "correlation": corr, "injection": inj}, indent=1)
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
