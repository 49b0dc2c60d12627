"""``userturn rescore --run DIR`` and ``userturn recover --run DIR``."""

from __future__ import annotations

from pathlib import Path

import typer

from userturn.run.repair import describe_changes, recover, rescore


def rescore_cmd(
    run: Path = typer.Option(..., "--run", help="Run directory.", metavar="DIR"),
) -> int:
    """Re-apply the current scorers to a run's stored answers and say what changed."""
    for line in describe_changes(rescore(run)):
        typer.echo(line)
    typer.echo(f"summary.json and records.jsonl updated in {run}")
    return 0


def recover_cmd(
    run: Path = typer.Option(..., "--run", help="Run directory.", metavar="DIR"),
    force: bool = typer.Option(False, "--force", help="Rebuild even a readable store."),
) -> int:
    """Rebuild a run's store from its records.jsonl (a damaged store is moved aside)."""
    res = recover(run, force=force)
    if res.moved_aside is not None:
        typer.echo(f"moved the old store aside to {res.moved_aside}")
    typer.echo(
        f"rebuilt {run}/store.sqlite: {res.user_turns} user turns, {res.likelihoods} "
        f"likelihood contexts, {res.answers} answers, {res.judgments} judgments; rerunning "
        "the same command resumes from here"
    )
    return 0


def register(app: typer.Typer) -> None:
    app.command("rescore")(rescore_cmd)
    app.command("recover")(recover_cmd)
