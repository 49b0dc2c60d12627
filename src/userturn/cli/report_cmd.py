"""``userturn report --run DIR`` and ``userturn compare RUN_A RUN_B``."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from userturn.cli import output
from userturn.errors import UserError

console = Console(highlight=False)


def report(
    run: Path = typer.Option(..., "--run", help="Run directory (the --out of `run`)."),
    judge: str = typer.Option(
        None, "--judge", help="Judge the tables and plots use (default: the first configured)."
    ),
    max_transcripts: int = typer.Option(
        None, "--max-transcripts", help="User turns embedded in report.html (default 5000)."
    ),
) -> int:
    """Write DIR/report/: tables (md, csv, tex), plots (png, svg) and report.html."""
    from userturn.report import DEFAULT_MAX_TRANSCRIPTS, build_report

    if max_transcripts is not None and max_transcripts < 0:
        raise UserError("must be >= 0", field="--max-transcripts")
    rep = build_report(
        run,
        judge=judge,
        max_transcripts=(DEFAULT_MAX_TRANSCRIPTS if max_transcripts is None else max_transcripts),
    )
    console.print(
        f"judge: {rep.judge_text}; {len(rep.tables) // 3} tables, "
        f"{len(rep.plots) // 2} plots, {rep.transcripts} of {rep.records} "
        "transcripts embedded"
    )
    console.print(f"tables: {rep.folder / 'tables'}")
    console.print(f"plots:  {rep.folder / 'plots'}")
    console.print(f"report: {rep.html}")
    return 0


def compare(
    run_a: Path = typer.Argument(..., help="First run directory (A).", metavar="RUN_A"),
    run_b: Path = typer.Argument(..., help="Second run directory (B).", metavar="RUN_B"),
    model_a: str = typer.Option(None, "--model-a", help="Model in A, if A has several."),
    model_b: str = typer.Option(None, "--model-b", help="Model in B, if B has several."),
    as_json: bool = typer.Option(False, "--json", help="Print the rows as JSON."),
    fmt: str = typer.Option("table", "--format", help=output.FORMAT_HELP),
) -> int:
    """Match cells on (dataset, T, perturbation, judge); print B - A with 95% CIs."""
    from userturn.analysis.compare import compare_detail, compare_table

    form = "json" if as_json else output.check_format(fmt)
    result = compare_detail(run_a, run_b, model_a, model_b)
    if form == "json":
        print(
            json.dumps(
                {
                    "rows": [r.to_json() for r in result.rows],
                    "only_a": result.only_a,
                    "only_b": result.only_b,
                },
                indent=2,
                ensure_ascii=False,
            )
        )
        return 0
    if not result.rows:
        raise UserError(
            "no matching cells (dataset, temperature, perturbation, judge) between the two runs",
            file=str(run_b),
        )
    table = compare_table(result.rows)
    cut = table.columns.index("Δ rate (pts)") + 1
    key = ("dataset", "T", "perturbation", "judge")
    output.emit(table, form, detail=table.columns[cut:], key=key)
    if result.only_a or result.only_b:
        output.note(
            f"unmatched cells: {len(result.only_a)} only in A, {len(result.only_b)} only in B",
            form,
        )
    return 0


def register(app: typer.Typer) -> None:
    app.command("report")(report)
    app.command("compare")(compare)
