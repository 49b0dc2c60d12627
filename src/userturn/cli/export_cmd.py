"""``userturn export``: write a run's data as files (``export labels`` here; other
exports add themselves to ``export_app``)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from userturn.analysis.agree import run_labels
from userturn.cli.io import atomic_lines, check_output

export_app = typer.Typer(help="Export a run's data as files.", no_args_is_help=True)


@export_app.command("labels")
def labels(
    run_dir: Path = typer.Option(..., "--run", help="Run directory."),
    judge: str = typer.Option(..., "--judge", help="Judge spec, as given to run/judge."),
    out: Path = typer.Option(..., "--out", help="Label file (JSONL) to write."),
    with_context: bool = typer.Option(
        False, "--with-context", help="Add messages and user_turn to each line."
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing --out."),
) -> int:
    """One judge's verdicts on a run's user turns, in the `judge --out` label format."""
    own = ("records.jsonl", "summary.json", "manifest.yaml", "run_stats.json", "store.sqlite")
    check_output(out, inputs=[run_dir / name for name in own], force=force)
    rows = run_labels(run_dir, judge)
    lines = []
    for r in rows.values():
        rec = {
            "id": r.id,
            "genuine_followup": r.genuine if r.ok else None,
            "label": r.label if r.ok else None,
            "rationale": r.rationale,
            "status": r.status,
            "cell": r.cell,
        }
        if with_context:
            rec.update(r.extra)
        lines.append(json.dumps(rec, ensure_ascii=False))
    atomic_lines(out, lines)
    typer.echo(f"wrote {len(rows)} labels to {out}")
    return 0


@export_app.command("inspect")
def inspect_logs(
    run_dir: Path = typer.Option(..., "--run", help="Run directory."),
    out: Path = typer.Option(..., "--out", help="Log directory to write (inspect's --log-dir)."),
    force: bool = typer.Option(False, "--force", help="Overwrite logs already in --out."),
) -> int:
    """The run as inspect_ai eval logs (one per model x dataset); browse them with
    `inspect view --log-dir LOGDIR`. Needs the [inspect] extra."""
    from userturn.errors import UserError
    from userturn.interop.inspect_logs import export_inspect

    if out.exists() and not out.is_dir():
        raise UserError("is a file, expected a log directory", file=str(out), field="--out")
    if out.exists() and out.resolve() == run_dir.resolve():
        raise UserError("is the run directory; choose another --out", file=str(out), field="--out")
    if out.is_dir() and any(out.glob("*.eval")) and not force:
        raise UserError("already holds .eval logs; pass --force to overwrite", file=str(out))
    for e in export_inspect(run_dir, out):
        typer.echo(f"wrote {e.path} ({e.samples} samples: {e.model} · {e.dataset} · {e.probe})")
    return 0


def register(app: typer.Typer) -> None:
    app.add_typer(export_app, name="export")
