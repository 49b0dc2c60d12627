"""``userturn run`` and ``userturn list``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from userturn.analysis import tables
from userturn.cli import options, output, plan
from userturn.cli.io import Interrupted
from userturn.cli.progress import progress_for
from userturn.config import RunConfig, build_config, load_config
from userturn.errors import UserError
from userturn.run import driver
from userturn.run.judge_stage import JudgeTally
from userturn.run.rollout import run_rollouts


def build_run_config(config: Path | None, flags: dict[str, Any]) -> RunConfig:
    overrides = {k: v for k, v in flags.items() if v is not None and v != []}
    if config is not None:
        return load_config(config, overrides)
    return build_config(overrides)


RENAMES = {"model": "models", "dataset": "datasets", "perturb": "perturbations", "judge": "judges"}
"""``run``'s options whose flag is singular (each is repeatable) and field plural."""
PARSERS = {
    "items": lambda text: options.ids(text, "--items"),
    "temperatures": lambda text: options.floats(text, "--temperatures"),
    "chat_template_kwargs": lambda text: options.json_object(text, "--chat-template-kwargs"),
}


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
    probe: str = typer.Option(
        None, "--probe", help="generate (default) | likelihood | rollout (see those commands)."
    ),
    turns: int = typer.Option(None, "--turns", help="Rollouts: user turns per conversation."),
    stop_on: str = typer.Option(None, "--stop-on", help="Rollouts: degenerate | never."),
    best_of: int = typer.Option(
        None, "--best-of", help="Rollouts: candidates per user turn; the most genuine is kept."
    ),
    select_judge: str = typer.Option(
        None, "--select-judge", help="Rollouts: judge that picks best-of turns (default: first)."
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Check everything, print the grid, what is left and costs."
    ),
    fmt: str = typer.Option("table", "--format", help=output.FORMAT_HELP),
) -> int:
    """Generate answers and user turns, judge them, and print the results table."""
    flags = options.by_name(  # the options by name: each is a RunConfig field
        locals(),
        RunConfig.model_fields,
        renames=RENAMES,
        parsers=PARSERS,
        cli_only=("config", "out", "dry_run", "fmt"),
    )
    form = output.check_format(fmt)
    cfg = build_run_config(config, flags)
    plan.check(cfg)
    if dry_run:
        return plan.dry_run(cfg, out)
    try:
        with progress_for() as bars:
            if cfg.probe == "rollout":
                out = out or driver.default_out(cfg)
                result = run_rollouts(cfg, out, bars)
            else:
                result = driver.run(cfg, out, bars)
    except driver.RunInterrupted as exc:
        raise Interrupted(str(exc)) from None
    print_results(result, form)
    return judge_failures(result.judging, result.out)


def print_results(result: driver.RunResult, fmt: output.Format = "table") -> None:
    if fmt == "json":
        print(json.dumps({"cells": [c.to_json() for c in result.cells]}, indent=2))
    else:
        key = ("model", "dataset", "T", "perturbation", "judge")
        output.emit(
            tables.results_table(result.cells), fmt, detail=("top failure labels",), key=key
        )
        note = tables.corrected_note([c for c in result.cells if c.probe == "generate"])
        if note:
            output.note(note, fmt)
    for job in result.jobs:
        desc = job.dataset.describe()
        avail = desc.get("available")
        output.note(
            f"{job.dataset.id}: {len(job.items)} items used"
            + (f" of {avail} available" if avail else "")
            + f"; source: {desc.get('source')}",
            fmt,
        )
    s = result.stats
    scored = s.extra.get("likelihood_scored", 0) + s.extra.get("likelihood_reused", 0)
    did = (
        f"{s.extra.get('likelihood_scored', 0)} contexts scored, "
        f"{s.extra.get('likelihood_reused', 0)} reused"
        if scored
        else f"{s.generated} user turns generated, {s.reused} reused"
    )
    output.note(
        f"this invocation: {did}, {s.model_calls} model calls, {s.judged} judgments; "
        f"run directory {result.out}",
        fmt,
    )


def judge_failures(tally: JudgeTally, out: Path) -> int:
    """Exit 1, with one line per judge, when a judge failed on most of the turns it judged:
    an outage must not pass for a result."""
    code = 0
    for judge in tally.failing():
        failed, n = tally.failed.get(judge, 0), tally.judged[judge]
        print(
            f"error: judge {judge} returned no verdict for {failed} of {n} user turns; "
            f"fix it, then `userturn judge --run {out} --judge {judge} --retry-failed`",
            file=sys.stderr,
        )
        code = 1
    return code


def list_cmd(
    fmt: str = typer.Option("table", "--format", help=output.FORMAT_HELP),
) -> int:
    """Show every model, dataset, judge and perturbation, with the options each accepts."""
    from userturn import registry

    form = output.check_format(fmt)
    rows = []
    for kind, plugins in registry.REGISTRY.items():
        if kind == "model":
            for name, spec in registry.named_models().items():
                rows.append([kind, name, f"named model ({spec})", ""])
        for name, plugin in plugins.items():
            rows.append([kind, name, plugin.help, ", ".join(sorted(plugin.options))])
    cols = ["kind", "name", "what", "options (?key=value)"]
    output.emit(tables.Table("list", "", cols, rows, rows), form, detail=(cols[-1],))
    return 0


FORWARD = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def likelihood(ctx: typer.Context) -> int:
    """The judge-free likelihood probe: `run --probe likelihood` with every `run` option.

    Scores the real next user turn of each context against degenerate candidates under
    the model's own user header (held-out sets, MT-Bench, jsonl rows with reference_turn).
    """
    from userturn.cli import main

    _forwarded_help("likelihood", likelihood.__doc__, ctx.args)
    return main(["run", "--probe", "likelihood", *ctx.args])


def rollout(ctx: typer.Context) -> int:
    """Multi-turn self-play: `run --probe rollout` with every `run` option, plus
    --turns N, --stop-on degenerate|never, --best-of N and --user-temperature T (the
    temperature of the user turns; answers use --answer-temperature)."""
    from userturn.cli import main

    _forwarded_help("rollout", rollout.__doc__, ctx.args)
    args = _user_temperature(list(ctx.args))
    return main(["run", "--probe", "rollout", *args])


def _user_temperature(args: list[str]) -> list[str]:
    """``--user-temperature T`` (or ``=T``) is ``--temperatures T``; without either, the
    user turns are sampled at T=1.0 (a rollout at T=0 repeats its single greedy path)."""
    for i, arg in enumerate(args):
        if arg.startswith("--user-temperature="):
            args[i : i + 1] = ["--temperatures", arg.partition("=")[2]]
        elif arg == "--user-temperature":
            if i + 1 >= len(args):
                raise UserError("expects a number", field="--user-temperature")
            args[i : i + 2] = ["--temperatures", args[i + 1]]
    given = any(a == "--temperatures" or a.startswith("--temperatures=") for a in args)
    if not given and "--config" not in args and not any(a.startswith("--config=") for a in args):
        args += ["--temperatures", "1.0"]
    return args


def _forwarded_help(name: str, doc: str | None, args: list[str]) -> None:
    """``userturn NAME --help`` says what NAME is before ``run``'s options, which it takes."""
    if "--help" in args or "-h" in args:
        text = " ".join((doc or "").split())
        output.say(f"userturn {name}: {text}\nIt takes every option of `userturn run`:\n")


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("list")(list_cmd)
    app.command("likelihood", context_settings=FORWARD)(likelihood)
    app.command("rollout", context_settings=FORWARD)(rollout)
