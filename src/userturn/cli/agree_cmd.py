"""``userturn agree``: compare two label files, two judges in a run, or two runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from userturn.analysis.agree import (
    BOOTSTRAP_REPS,
    LabelRow,
    agreement,
    disagreement_slice,
    read_labels,
    run_labels,
)
from userturn.errors import UserError


def _sides(
    files: list[Path], runs: list[Path], judges: str | None, cell_key: str
) -> tuple[dict[str, LabelRow], dict[str, LabelRow]]:
    """A and B from `A.jsonl B.jsonl`, `--run DIR --judges J1,J2` or two `--run`s."""
    if files and runs:
        raise UserError("give two label files or --run, not both", field="run")
    if files:
        if len(files) != 2 or judges:
            raise UserError("give exactly two label files (and no --judges)", field="files")
        return read_labels(files[0], cell_key), read_labels(files[1], cell_key)
    if not runs or len(runs) > 2:
        raise UserError("give two label files, or --run DIR (once or twice)", field="run")
    names = [j.strip() for j in (judges or "").split(",") if j.strip()]
    if len(runs) == 1 and len(names) != 2:
        raise UserError("--run DIR needs --judges J1,J2", field="judges")
    if len(runs) == 2 and len(names) not in (1, 2):
        raise UserError("two runs need --judges J or --judges J1,J2", field="judges")
    run_a, run_b = runs[0], runs[-1]
    return run_labels(run_a, names[0]), run_labels(run_b, names[-1])


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _print(res: dict[str, Any]) -> None:
    d = res["dropped_detail"]
    lo, hi = res["kappa_ci"]
    typer.echo(
        f"n = {res['n']} matched ok rows; dropped {res['dropped']} (not ok on a "
        f"side: {d['not_ok']}, only in A: {d['only_in_a']}, only in B: {d['only_in_b']})"
    )
    typer.echo(f"genuine rate: A {_pct(res['rate_a'])}, B {_pct(res['rate_b'])}")
    typer.echo(
        f"agreement on genuine: {_pct(res['agreement'])}, kappa {_num(res['kappa'])} "
        f"[95% CI {_num(lo)}, {_num(hi)}]"
    )
    typer.echo(f"label agreement: {_pct(res['label_agreement'])}, kappa {_num(res['label_kappa'])}")
    (tt, tf), (ft, ff) = res["confusion"]["matrix"]
    typer.echo("confusion (rows A, columns B):  genuine  not")
    typer.echo(f"  genuine                        {tt:7d}  {tf:3d}")
    typer.echo(f"  not                            {ft:7d}  {ff:3d}")
    cells = res["per_cell"]
    if cells:
        typer.echo(
            f"per-cell rates over {len(cells['cells'])} cells: Pearson "
            f"{_num(cells['pearson'])}, Spearman {_num(cells['spearman'])}"
        )


def agree(
    files: list[Path] = typer.Argument(None, help="Two label files, A and B."),
    runs: list[Path] = typer.Option(None, "--run", help="Run directory (once or twice)."),
    judges: str = typer.Option(None, "--judges", help="J1,J2 (or J for two runs)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    disagreements: Path = typer.Option(
        None, "--disagreements", help="Write the disagreement slice (JSONL)."
    ),
    cell_key: str = typer.Option("cell", "--by", help="Label-file key that names a cell."),
    reps: int = typer.Option(BOOTSTRAP_REPS, "--bootstrap", help="Bootstrap resamples."),
    seed: int = typer.Option(0, "--seed"),
) -> int:
    """Agreement (percent, Cohen's kappa with bootstrap CI, labels, confusion)."""
    a, b = _sides(list(files or []), list(runs or []), judges, cell_key)
    res = agreement(a, b, reps=reps, seed=seed)
    if disagreements is not None:
        rows = disagreement_slice(a, b)
        disagreements.parent.mkdir(parents=True, exist_ok=True)
        with disagreements.open("w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        res["disagreements_file"] = str(disagreements)
    if as_json:
        typer.echo(json.dumps(res, indent=2))
    else:
        _print(res)
        if disagreements is not None:
            typer.echo(f"wrote the disagreement slice to {disagreements}")
    return 0


def register(app: typer.Typer) -> None:
    app.command("agree")(agree)
