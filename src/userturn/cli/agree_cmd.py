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
from userturn.analysis.tables import Table
from userturn.cli import output
from userturn.cli.io import atomic_lines, check_output
from userturn.errors import UserError


def _sides(
    files: list[Path], runs: list[Path], judges: str | None, cell_key: str
) -> tuple[dict[str, LabelRow], dict[str, LabelRow]]:
    """A and B from `A.jsonl B.jsonl`, `--run DIR --judges J1,J2` or two `--run`s."""
    if files and runs:
        raise UserError("give two label files or --run, not both", field="--run")
    if files:
        if len(files) != 2 or judges:
            raise UserError("give exactly two label files (and no --judges)", field="A B")
        a = _nonempty(files[0], read_labels(files[0], cell_key))
        return a, _nonempty(files[1], read_labels(files[1], cell_key))
    if not runs or len(runs) > 2:
        raise UserError("give two label files, or --run DIR (once or twice)", field="--run")
    names = [j.strip() for j in (judges or "").split(",") if j.strip()]
    if len(runs) == 1 and len(names) != 2:
        raise UserError("--run DIR needs --judges J1,J2", field="--judges")
    if len(runs) == 2 and len(names) not in (1, 2):
        raise UserError("two runs need --judges J or --judges J1,J2", field="--judges")
    run_a, run_b = runs[0], runs[-1]
    return run_labels(run_a, names[0]), run_labels(run_b, names[-1])


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def summary_table(res: dict[str, Any], confusion: bool = True) -> Table:
    """The agreement figures as (measure, value) rows: one shape for every format (the
    terminal shows the confusion as its own grid instead)."""
    d = res["dropped_detail"]
    lo, hi = res["kappa_ci"]
    (tt, tf), (ft, ff) = res["confusion"]["matrix"]
    rows = [
        ["matched ok rows (n)", str(res["n"])],
        [
            "dropped",
            f"{res['dropped']} (not ok on a side {d['not_ok']}, only in A {d['only_in_a']}, "
            f"only in B {d['only_in_b']})",
        ],
        ["genuine rate A / B", f"{_pct(res['rate_a'])} / {_pct(res['rate_b'])}"],
        ["agreement on genuine", _pct(res["agreement"])],
        ["Cohen's kappa [95% CI]", f"{_num(res['kappa'])} [{_num(lo)}, {_num(hi)}]"],
        ["kappa CI method", str(res.get("kappa_ci_method", "-"))],
        ["label agreement", _pct(res["label_agreement"])],
        ["label kappa", _num(res["label_kappa"])],
    ]
    if confusion:
        rows += [
            ["confusion: A genuine, B genuine / not", f"{tt} / {tf}"],
            ["confusion: A not, B genuine / not", f"{ft} / {ff}"],
        ]
    cells = res["per_cell"]
    if cells:
        rows.append(
            [
                f"per-cell rates ({len(cells['cells'])} cells)",
                f"Pearson {_num(cells['pearson'])}, Spearman {_num(cells['spearman'])}",
            ]
        )
    return Table("agreement", "", ["measure", "value"], rows, rows)


def confusion_table(res: dict[str, Any]) -> Table:
    (tt, tf), (ft, ff) = res["confusion"]["matrix"]
    rows = [["A genuine", str(tt), str(tf)], ["A not genuine", str(ft), str(ff)]]
    cols = ["confusion (rows A, columns B)", "B genuine", "B not genuine"]
    return Table("confusion", "", cols, rows, rows)


def _check(a: dict[str, LabelRow], b: dict[str, LabelRow], res: dict[str, Any], where: str) -> None:
    """n = 0 is not a result, unless per-cell rates still compare (two runs' different
    user turns in the same cells): say why nothing could be compared."""
    if res["n"] or res["per_cell"]:
        return
    d = res["dropped_detail"]
    if len(a) + len(b) - d["only_in_a"] - d["only_in_b"] == 0:
        raise UserError(
            f"no id is in both A ({len(a)} ids) and B ({len(b)} ids); labels are matched by id",
            file=where,
        )
    raise UserError(
        f"none of the {d['not_ok']} ids in both A and B has an ok verdict on both sides",
        file=where,
    )


def _nonempty(path: Path, rows: dict[str, LabelRow]) -> dict[str, LabelRow]:
    if not rows:
        raise UserError("the label file is empty (no JSON lines)", file=str(path))
    return rows


def agree(
    files: list[Path] = typer.Argument(None, help="Two label files, A and B.", metavar="A B"),
    runs: list[Path] = typer.Option(None, "--run", help="Run directory (once or twice)."),
    judges: str = typer.Option(None, "--judges", help="J1,J2 (or J for two runs)."),
    as_json: bool = typer.Option(False, "--json", help="Same as --format json."),
    fmt: str = typer.Option("table", "--format", help=output.FORMAT_HELP),
    disagreements: Path = typer.Option(
        None, "--disagreements", help="Write the disagreement slice (JSONL)."
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing --disagreements."),
    cell_key: str = typer.Option("cell", "--by", help="Label-file key that names a cell."),
    reps: int = typer.Option(BOOTSTRAP_REPS, "--bootstrap", help="Bootstrap resamples (0: no CI)."),
    seed: int = typer.Option(0, "--seed"),
) -> int:
    """Agreement of two label sets: percent, Cohen's kappa with a 95% CI, labels, confusion.

    The kappa CI joins a percentile bootstrap over ids with a Wilson floor on the observed
    agreement, so it stays wide on few ids (three ids that agree do not give [1, 1])."""
    form = "json" if as_json else output.check_format(fmt)
    if reps < 0:
        raise UserError(f"must be >= 0, got {reps}", field="--bootstrap")
    inputs = list(files or [])
    if disagreements is not None:
        check_output(disagreements, inputs=inputs, force=force, field="--disagreements")
    a, b = _sides(inputs, list(runs or []), judges, cell_key)
    res = agreement(a, b, reps=reps, seed=seed)
    _check(a, b, res, " vs ".join(str(p) for p in inputs or runs or []))
    if disagreements is not None:
        rows = disagreement_slice(a, b)
        atomic_lines(disagreements, [json.dumps(r, ensure_ascii=False) for r in rows])
        res["disagreements_file"] = str(disagreements)
    if form == "json":
        typer.echo(json.dumps(res, indent=2))
        return 0
    output.emit(summary_table(res, confusion=form != "table"), form)
    if form == "table":
        output.console().print()
        output.emit(confusion_table(res), form)
    if disagreements is not None:
        output.note(f"wrote the disagreement slice to {disagreements}", form)
    return 0


def register(app: typer.Typer) -> None:
    app.command("agree")(agree)
