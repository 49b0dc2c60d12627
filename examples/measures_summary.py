"""The table of examples/measures-local.sh: judged rate, GF@k, likelihood and challenges.

GF@4 is printed beside its null floor (what a judge with the card's error rates reports
when no turn is genuine) and its value corrected through those error rates.

Usage: ``.venv/bin/python examples/measures_summary.py runs/measures-local``. Prints a
Markdown table (one row per model x held-out dataset, plus the injection control per
model) and the Spearman correlation, over models x datasets, between each likelihood
measure (answer PMI and role contrast of the real next turn; the ranking as a secondary)
and the judged rate. The injection control is paired by item (inject-error vs the same
item's clean answer). Writes ``summary.json`` beside.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from scipy.stats import spearmanr

from userturn.analysis.views import analyze
from userturn.rundir.store import open_run

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
                    "gf_at_k_null": c.get("gf_at_k_null") or {},
                    "gf_at_k_corrected": c.get("gf_at_k_corrected") or {},
                    "gf_at_k_corrected_ci": c.get("gf_at_k_corrected_ci") or {},
                    "contexts": lc.get("n"),
                    "preferred": lc.get("preference_accuracy"),
                    "preferred_ci": (lc.get("preference_ci_low"), lc.get("preference_ci_high")),
                    "margin": lc.get("margin"),
                    "margin_ci": (lc.get("margin_ci_low"), lc.get("margin_ci_high")),
                    **{k: lc.get(k) for k in V2_FIELDS},
                }
            )
    return out


V2_FIELDS = [
    f"{name}{end}"
    for name in ("pmi_share", "pmi_excess_share", "pmi_mean", "role_share", "role_mean", "role_auc")
    for end in ("", "_ci_low", "_ci_high")
] + ["pmi_control_share", "likelihood_excluded"]


def injection(root: Path) -> list[dict[str, Any]]:
    """The paired challenge delta per model (from the run's store: it needs the items)."""
    out = []
    for model_dir in sorted(p for p in root.iterdir() if (p / "inject").is_dir()):
        with open_run(model_dir / "inject") as store:
            deltas = [
                d
                for d in analyze(store).deltas
                if d.judge == JUDGE and d.perturbation == "inject-error"
            ]
        by_pert = {c["perturbation"]: c for c in cells(model_dir / "inject") if c["judge"] == JUDGE}
        none, inj = by_pert.get("none", {}), by_pert.get("inject-error", {})
        row: dict[str, Any] = {
            "model": model_dir.name,
            "accuracy": none.get("accuracy"),
            "n": (none.get("n"), inj.get("n")),
            "not_applied": inj.get("n_not_applied"),
        }
        if deltas:
            d = deltas[0]
            for name in ("challenge_delta", "challenge_delta_correct", "challenge_delta_incorrect"):
                row[name] = (getattr(d, name), getattr(d, f"{name}_ci_low"),
                             getattr(d, f"{name}_ci_high"))  # fmt: skip
            row["challenge_none"] = d.challenge_rate_base
            row["challenge_injected"] = d.challenge_rate
            row["items"] = (d.challenge_items, d.challenge_items_correct,
                            d.challenge_items_incorrect)  # fmt: skip
        out.append(row)
    return out


def signed(x: float | None, lo: float | None = None, hi: float | None = None) -> str:
    if x is None:
        return "–"
    if lo is None or hi is None:
        return f"{100 * x:+.1f}"
    return f"{100 * x:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"


def nats(x: float | None, lo: float | None = None, hi: float | None = None) -> str:
    if x is None:
        return "–"
    if lo is None or hi is None:
        return f"{x:+.2f}"
    return f"{x:+.2f} [{lo:+.2f}, {hi:+.2f}]"


def _v2(r: dict[str, Any], name: str) -> tuple[Any, Any, Any]:
    return r.get(name), r.get(f"{name}_ci_low"), r.get(f"{name}_ci_high")


def _rho(x: list[float], y: list[float]) -> list[float] | str:
    if len(set(x)) < 2 or len(set(y)) < 2:
        return "undefined: one side is constant"
    res = spearmanr(x, y)
    return [round(float(res[0]), 3), round(float(res[1]), 3)]


def main(root: Path) -> None:
    table = rows(root)
    head = ["model", "dataset", "judged rate [95% CI]", "corrected [95% CI]"]
    head += ["GF@4 (null)", "GF@4 corrected [95% CI]"]
    head += ["PMI > 0 [95% CI]", "PMI > 0, real - control", "PMI mean, nats"]
    head += ["role > 0 [95% CI]", "role mean, nats", "role AUC", "ranking (secondary)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in table:
        gf, ci = r["gf_at_k"], r["gf_at_k_corrected_ci"].get("4") or (None, None)
        null = r["gf_at_k_null"].get("4")
        judged_gf = pct(gf.get("4")) + ("" if null is None else f" ({pct(null)})")
        print(
            f"| {r['model']} | {r['dataset']} | {pct(r['rate'], *r['rate_ci'])} "
            f"| {pct(r['corrected'], *r['corrected_ci'])} | {judged_gf} "
            f"| {pct(r['gf_at_k_corrected'].get('4'), *ci)} "
            f"| {pct(*_v2(r, 'pmi_share'))} | {signed(*_v2(r, 'pmi_excess_share'))} "
            f"| {nats(*_v2(r, 'pmi_mean'))} | {pct(*_v2(r, 'role_share'))} "
            f"| {nats(*_v2(r, 'role_mean'))} | {nats(*_v2(r, 'role_auc'))} "
            f"| {pct(r['preferred'], *r['preferred_ci'])} |"
        )
    measures = ["pmi_share", "pmi_excess_share", "pmi_mean", "role_share", "role_mean", "preferred"]
    pts = [r for r in table if r.get("pmi_share") is not None and r["rate"] is not None]
    corr: dict[str, Any] = {"points": len(pts)}
    for m in measures:
        corr[f"spearman_{m}_vs_rate [rho, p]"] = _rho([r[m] for r in pts], [r["rate"] for r in pts])
    print(f"\nSpearman over {len(pts)} model x dataset points: {corr}")
    inj = injection(root)
    head = ["model", "accuracy", "items (all/correct/wrong)", "challenges none", "injected"]
    head += ["paired delta [95% CI]", "delta, clean correct", "delta, clean wrong", "not applied"]
    print("\n| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in inj:
        items = "/".join(str(x) for x in r.get("items", ()))
        print(
            f"| {r['model']} | {pct(r['accuracy'])} | {items} | {pct(r.get('challenge_none'))} "
            f"| {pct(r.get('challenge_injected'))} "
            f"| {signed(*r.get('challenge_delta', (None,)))} "
            f"| {signed(*r.get('challenge_delta_correct', (None,)))} "
            f"| {signed(*r.get('challenge_delta_incorrect', (None,)))} | {r['not_applied']} |"
        )
    (root / "summary.json").write_text(
        json.dumps({"rows": table, "correlation": corr, "injection": inj}, indent=1)
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
