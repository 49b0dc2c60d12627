"""``userturn export conversations``: a run's conversations as chat-format JSONL."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from userturn.analysis.agree import resolve_judge
from userturn.cli.export_cmd import export_app
from userturn.cli.io import atomic_lines, check_output
from userturn.errors import UserError
from userturn.run.conversations import export_conversations
from userturn.rundir.store import open_run


@export_app.command("conversations")
def conversations(
    run_dir: Path = typer.Option(..., "--run", help="Run directory.", metavar="DIR"),
    out: Path = typer.Option(..., "--out", help="JSONL file to write.", metavar="FILE"),
    only_genuine: bool = typer.Option(
        False,
        "--only-genuine",
        help="Keep genuine user turns only (rollouts: up to the first degenerate one).",
    ),
    judge: str = typer.Option(
        None, "--judge", help="Judge deciding 'genuine' (default: the run's only judge)."
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing --out."),
) -> int:
    """Write {"messages": [...]} lines that `datasets.load_dataset("json")` and
    `userturn train sft` read."""
    check_output(out, force=force)
    with open_run(run_dir) as store:
        judge_id = _judge(store.judges(), judge, only_genuine)
        exported = export_conversations(store, judge_id, only_genuine)
    atomic_lines(out, (json.dumps(line, ensure_ascii=False) for line in exported.lines))
    typer.echo(
        f"wrote {len(exported.lines)} conversations to {out}"
        + (f" ({exported.dropped} without a genuine user turn left out)" if only_genuine else "")
    )
    return 0


def _judge(available: list[str], judge: str | None, needed: bool) -> str | None:
    if judge is not None:
        return resolve_judge(judge, available)
    if len(available) == 1:
        return available[0]
    if needed:
        raise UserError(
            f"--only-genuine needs a judge; this run has {len(available)} "
            f"({', '.join(available) or 'none'}): pick one with --judge",
            field="judge",
        )
    return None


def register(app: typer.Typer) -> None:
    """Nothing to add: the command registers itself on ``export``."""
