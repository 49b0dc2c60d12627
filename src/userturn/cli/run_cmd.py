"""``userturn run`` and ``userturn list``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from userturn.analysis.cells import top_labels
from userturn.analysis.tables import Table
from userturn.cli import options, output
from userturn.cli.progress import progress_for
from userturn.config import RunConfig, build_config, load_config
from userturn.run import driver
from userturn.run.judge_stage import JudgeTally
from userturn.run.records import CellSummary


def build_run_config(config: Path | None, flags: dict[str, Any]) -> RunConfig:
    overrides = {k: v for k, v in flags.items() if v is not None and v != []}
    if config is not None:
        return load_config(config, overrides)
    return build_config(overrides)


def run(
    model: list[str] = typer.Option(None, "--model", help="Model spec (repeatable)."),
    dataset: list[str] = typer.Option(None, "--dataset", help="Dataset spec (repeatable)."),
    limit: int = typer.Option(None, "--limit", help="First N items of each dataset."),
    sample: int = typer.Option(
        None, "--sample", help="N items drawn at random (seeded by --seed) from each dataset."
    ),
    items: str = typer.Option(None, "--items", help="Only these item ids (comma-separated)."),
    temperatures: str = typer.Option(None, "--temperatures", help="e.g. 0,0.7,1.0"),
    samples: int = typer.Option(None, "--samples", help="k samples per context at T>0."),
    perturb: list[str] = typer.Option(None, "--perturb", help="Perturbation (repeatable)."),
    judge: list[str] = typer.Option(None, "--judge", help="Judge spec (repeatable)."),
    config: Path = typer.Option(None, "--config", help="YAML experiment or manifest."),
    seed: int = typer.Option(None, "--seed"),
    out: Path = typer.Option(None, "--out", help="Run directory (resumes if it exists)."),
    executor: str = typer.Option(None, "--executor", help="local | ray"),
    address: str = typer.Option(None, "--address", help="Ray cluster address."),
    workers: int = typer.Option(None, "--workers", help="Ray workers."),
    chat_template: str = typer.Option(None, "--chat-template", help="Template file."),
    bos_token: str = typer.Option(None, "--bos-token"),
    eos_token: str = typer.Option(None, "--eos-token"),
    base_url: str = typer.Option(None, "--base-url", help="OpenAI-compatible server."),
    judge_base_url: str = typer.Option(None, "--judge-base-url"),
    max_answer_tokens: int = typer.Option(None, "--max-answer-tokens"),
    max_user_tokens: int = typer.Option(None, "--max-user-tokens"),
    answer_temperature: float = typer.Option(None, "--answer-temperature"),
    top_p: float = typer.Option(None, "--top-p"),
    top_k: int = typer.Option(None, "--top-k"),
    system_prompt: str = typer.Option(None, "--system-prompt"),
    chat_template_kwargs: str = typer.Option(None, "--chat-template-kwargs", help="JSON."),
    history_reasoning: str = typer.Option(
        None, "--history-reasoning", help="template | strip | keep"
    ),
    system_placement: str = typer.Option(
        None,
        "--system-placement",
        help="template | first-turn: where a system message goes if the template would "
        "fold it into the next user turn.",
    ),
    judge_reference: bool = typer.Option(None, "--judge-reference/--no-judge-reference"),
    skip_bad_rows: bool = typer.Option(None, "--skip-bad-rows/--no-skip-bad-rows"),
    keep_configs: bool = typer.Option(
        None,
        "--keep-configs/--no-keep-configs",
        help="Let --out hold results of other settings too, as separate cells.",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the grid and costs only."),
) -> int:
    """Generate answers and user turns, judge them, and print the results table."""
    flags: dict[str, Any] = {
        "models": model,
        "datasets": dataset,
        "limit": limit,
        "sample": sample,
        "items": options.ids(items, "items") if items else None,
        "temperatures": options.floats(temperatures, "temperatures") if temperatures else None,
        "samples": samples,
        "perturbations": perturb,
        "judges": judge,
        "seed": seed,
        "executor": executor,
        "address": address,
        "workers": workers,
        "chat_template": chat_template,
        "bos_token": bos_token,
        "eos_token": eos_token,
        "base_url": base_url,
        "judge_base_url": judge_base_url,
        "max_answer_tokens": max_answer_tokens,
        "max_user_tokens": max_user_tokens,
        "answer_temperature": answer_temperature,
        "top_p": top_p,
        "top_k": top_k,
        "system_prompt": system_prompt,
        "history_reasoning": history_reasoning,
        "system_placement": system_placement,
        "chat_template_kwargs": (
            options.json_object(chat_template_kwargs, "chat-template-kwargs")
            if chat_template_kwargs
            else None
        ),
        "judge_reference": judge_reference,
        "skip_bad_rows": skip_bad_rows,
        "keep_configs": keep_configs,
    }
    cfg = build_run_config(config, flags)
    if dry_run:
        return _dry_run(cfg, out)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console,
        disable=not console.is_terminal,
    ) as bar:
        result = driver.run(cfg, out, RichProgress(bar))
    print_results(result)
    return judge_failures(result.judging, result.out)


def _dry_run(cfg: RunConfig, out: Path | None) -> int:
    jobs = driver.load_jobs(cfg)
    judges = driver.load_judges(cfg)
    n_items = sum(len(j.items) for j in jobs)
    turns = driver.planned_user_turns(cfg, jobs) * len(cfg.models)
    answers = sum(len(j.items) for j in jobs if j.items and not j.items[0].held_out)
    console.print(f"run directory: {out or driver.default_out(cfg)}")
    console.print(
        f"grid: {len(cfg.models)} model(s) x {len(jobs)} dataset(s) "
        f"({n_items} items) x T={cfg.temperatures} x k={cfg.samples} "
        f"x perturbations={cfg.perturbations} x judges={cfg.judges}"
    )
    console.print(
        f"model calls: {answers * len(cfg.models)} answers + {turns} user turns (before resume)"
    )
    for judge in judges:
        est = judge.estimate(turns)
        cost = est.get("cost_usd")
        console.print(
            f"judge {judge.id}: {est.get('calls', 0)} calls, estimated cost "
            + ("unknown (set a price table)" if cost is None else f"${cost:.4f}")
        )
    return 0


def _ci(cell: CellSummary) -> str:
    if cell.rate is None or cell.ci_low is None or cell.ci_high is None:
        return "-"
    return f"{cell.rate:.1%} [{cell.ci_low:.1%}, {cell.ci_high:.1%}]"


def print_results(result: driver.RunResult) -> None:
    cells = result.cells
    show_pert = any(c.perturbation != "none" for c in cells)
    show_judge = len({c.judge for c in cells}) > 1
    table = Table(title="genuine follow-up rate (user turns judged genuine)")
    cols = (
        ["model", "dataset", "T"]
        + (["perturbation"] if show_pert else [])
        + (["judge"] if show_judge else [])
        + ["n", "accuracy", "genuine rate [95% CI]", "unparseable", "top failure labels"]
    )
    for col in cols:
        table.add_column(col, overflow="fold")
    for c in cells:
        acc = "-" if c.accuracy is None else f"{c.accuracy:.1%} ({c.n_answers})"
        temp = "-" if c.temperature is None else f"{c.temperature:g}"
        row = [c.model, c.dataset, temp]
        row += [c.perturbation] if show_pert else []
        row += [str(c.judge)] if show_judge else []
        row += [
            str(c.n),
            acc,
            _ci(c),
            str(c.failed),
            top_labels(c.labels, exclude=("plausible_followup",)),
        ]
        table.add_row(*row)
    console.print(table)
    for job in result.jobs:
        desc = job.dataset.describe()
        avail = desc.get("available")
        console.print(
            f"{job.dataset.id}: {len(job.items)} items used"
            + (f" of {avail} available" if avail else "")
            + f"; source: {desc.get('source')}"
        )
    s = result.stats
    console.print(
        f"this invocation: {s.generated} user turns generated, {s.reused} reused, "
        f"{s.model_calls} model calls, {s.judged} judgments; "
        f"run directory {result.out}"
    )


def judge_failures(tally: JudgeTally, out: Path) -> int:
    """Exit 1, with one line per judge, when a judge failed on most of the turns it judged:
    an outage must not pass for a result."""
    code = 0
    for judge in tally.failing():
        failed, n = tally.failed.get(judge, 0), tally.judged[judge]
        err_console.print(
            f"error: judge {judge} returned no verdict for {failed} of {n} user turns; "
            f"fix it, then `userturn judge --run {out} --judge {judge} --retry-failed`",
            soft_wrap=True,
        )
        code = 1
    return code


def list_cmd() -> int:
    """Show every model, dataset, judge and perturbation, with the options each accepts."""
    from userturn import registry

    for kind, plugins in registry.REGISTRY.items():
        console.print(f"[bold]{kind}s[/bold]")
        if kind == "model":
            for name, spec in registry.named_models().items():
                console.print(f"  {name:<22} named model ({spec})")
        for name, plugin in plugins.items():
            console.print(f"  {name:<22} {plugin.help}")
            if plugin.options:
                console.print(f"  {'':<22} options: {', '.join(sorted(plugin.options))}")
    return 0


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("list")(list_cmd)
