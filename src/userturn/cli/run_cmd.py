"""``userturn run`` and ``userturn list``."""

from __future__ import annotations

import inspect
import json
import sys
import time
import typing
from pathlib import Path
from typing import Any

import typer

from userturn.analysis import run_table as results
from userturn.analysis.cell import GenerateCell
from userturn.analysis.tables import Table
from userturn.cli import options, output, plan, speed
from userturn.cli.io import Interrupted
from userturn.cli.progress import progress_for
from userturn.config import RunConfig, build_config, load_config
from userturn.errors import UserError
from userturn.run import driver
from userturn.run.judge_stage import JudgeTally
from userturn.run.probes import probe_for


def build_run_config(config: Path | None, flags: dict[str, Any]) -> RunConfig:
    overrides = {k: v for k, v in flags.items() if v is not None and v != []}
    if config is not None:
        return load_config(config, overrides)
    return build_config(overrides)


MODEL, SAMPLING, JUDGING, OUTPUT, EXECUTION = (
    "Model & data",
    "Sampling",
    "Judging",
    "Output",
    "Execution",
)


def _default(field: str) -> str:
    """A RunConfig default as a user types it: ``0,1``, ``gsm8k``, ``512``."""
    value = RunConfig.model_fields[field].get_default(call_default_factory=True)
    if isinstance(value, list):
        return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:g}" if isinstance(value, float) else str(value)


RENAMES = {"model": "models", "dataset": "datasets", "perturb": "perturbations", "judge": "judges"}
"""``run``'s options whose flag is singular (each is repeatable) and field plural."""
PARSERS = {
    "items": lambda text: options.ids(text, "--items"),
    "temperatures": lambda text: options.floats(text, "--temperatures"),
    "chat_template_kwargs": lambda text: options.json_object(text, "--chat-template-kwargs"),
}


def _opt(flag: str, help: str, panel: str, field: str | None = None, shown: str = "") -> Any:
    """An option whose default lives in RunConfig (so a --config file can set it): the
    flag's own default is None, and its help names the real one."""
    said = shown or (_default(field) if field else "")
    text = help + (f" [default: {said}]" if said else "")
    return typer.Option(None, flag, help=text, rich_help_panel=panel)


def run(
    model: list[str] = _opt(
        "--model",
        "Model spec, quoted (repeatable): a named model, llamacpp:FILE.gguf, "
        "hf:ID, vllm:ID, openai:ID.",
        MODEL,
        "models",
    ),
    dataset: list[str] = _opt(
        "--dataset",
        "Dataset spec (repeatable): gsm8k, healthbench, jsonl:FILE, ... (`userturn list`).",
        MODEL,
        "datasets",
    ),
    limit: int = _opt("--limit", "First N items of each dataset.", MODEL, shown="all items"),
    sample: int = _opt(
        "--sample",
        "N items drawn at random (seeded by --seed) from each dataset.",
        MODEL,
        shown="off",
    ),
    items: str = _opt("--items", "Only these item ids (comma-separated).", MODEL, shown="all"),
    config: Path = _opt(
        "--config",
        "YAML experiment or manifest; flags given here override it.",
        MODEL,
        shown="none",
    ),
    chat_template: str = _opt(
        "--chat-template",
        "Jinja chat template file, instead of the model's own.",
        MODEL,
        shown="the model's",
    ),
    bos_token: str = _opt(
        "--bos-token", "BOS token the template renders.", MODEL, shown="the model's"
    ),
    eos_token: str = _opt(
        "--eos-token", "EOS token the template renders.", MODEL, shown="the model's"
    ),
    system_prompt: str = _opt(
        "--system-prompt", "A system message before each conversation.", MODEL, shown="none"
    ),
    chat_template_kwargs: str = _opt(
        "--chat-template-kwargs",
        "JSON passed to the template, e.g. '{\"enable_thinking\": false}'.",
        MODEL,
        shown="{}",
    ),
    history_reasoning: str = _opt(
        "--history-reasoning",
        "Earlier answers' reasoning in the prompt: template (as the template does), strip or keep.",
        MODEL,
        "history_reasoning",
    ),
    system_placement: str = _opt(
        "--system-placement",
        "template | first-turn: where a system message goes if the "
        "template would fold it into the next user turn.",
        MODEL,
        "system_placement",
    ),
    skip_bad_rows: bool = typer.Option(
        None,
        "--skip-bad-rows/--no-skip-bad-rows",
        help="Skip dataset rows that fail to load instead of stopping. [default: no-skip-bad-rows]",
        rich_help_panel=MODEL,
    ),
    temperatures: str = _opt(
        "--temperatures",
        "User-turn temperatures, comma-separated, e.g. 0,0.7,1.0.",
        SAMPLING,
        "temperatures",
    ),
    samples: int = _opt(
        "--samples", "k user turns per context at T>0 (T=0 gets one).", SAMPLING, "samples"
    ),
    perturb: list[str] = _opt(
        "--perturb",
        "Perturb the answer before the user turn (repeatable): none, "
        "truncate:0.5, inject-error, ... (`userturn list`).",
        SAMPLING,
        "perturbations",
    ),
    seed: int = _opt("--seed", "Seed of sampling and of --sample.", SAMPLING, "seed"),
    max_answer_tokens: int = _opt(
        "--max-answer-tokens",
        "Token budget of each answer; a cut answer counts as wrong.",
        SAMPLING,
        "max_answer_tokens",
    ),
    max_user_tokens: int = _opt(
        "--max-user-tokens", "Token budget of each user turn.", SAMPLING, "max_user_tokens"
    ),
    answer_temperature: float = _opt(
        "--answer-temperature", "Temperature of the answers.", SAMPLING, "answer_temperature"
    ),
    top_p: float = _opt("--top-p", "Nucleus sampling of user turns (1: off).", SAMPLING, "top_p"),
    top_k: int = _opt("--top-k", "Top-k sampling of user turns (0: off).", SAMPLING, "top_k"),
    probe: str = _opt(
        "--probe", "generate | likelihood | rollout (or use those commands).", SAMPLING, "probe"
    ),
    turns: int = _opt("--turns", "Rollouts: user turns per conversation.", SAMPLING, "turns"),
    stop_on: str = _opt("--stop-on", "Rollouts: degenerate | never.", SAMPLING, "stop_on"),
    best_of: int = _opt(
        "--best-of",
        "Rollouts: candidates per user turn; the most genuine is kept.",
        SAMPLING,
        "best_of",
    ),
    select_judge: str = _opt(
        "--select-judge",
        "Rollouts: judge that picks best-of turns; another --judge scores them.",
        JUDGING,
        shown="the first --judge",
    ),
    judge: list[str] = _opt(
        "--judge",
        "Judge spec (repeatable): offline, rules, llm:MODEL, openai:MODEL, cascade:MODEL.",
        JUDGING,
        "judges",
    ),
    judge_base_url: str = _opt(
        "--judge-base-url",
        "OpenAI-compatible server of an llm:/openai: judge.",
        JUDGING,
        shown="$OPENAI_BASE_URL",
    ),
    judge_reference: bool = typer.Option(
        None,
        "--judge-reference/--no-judge-reference",
        help="Also judge the dataset's real next user turns (a human baseline). "
        "[default: no-judge-reference]",
        rich_help_panel=JUDGING,
    ),
    out: Path = _opt(
        "--out",
        "Run directory; an existing one is resumed.",
        OUTPUT,
        shown="runs/MODEL-DATASET-HASH",
    ),
    keep_configs: bool = typer.Option(
        None,
        "--keep-configs/--no-keep-configs",
        help="Let --out hold results of other settings too, as separate cells. "
        "[default: no-keep-configs]",
        rich_help_panel=OUTPUT,
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Check files and specs; print the grid, what is left and "
        "an estimate of time and cost; run nothing.",
        rich_help_panel=OUTPUT,
    ),
    fmt: str = typer.Option("table", "--format", help=output.FORMAT_HELP, rich_help_panel=OUTPUT),
    executor: str = _opt("--executor", "local | ray.", EXECUTION, "executor"),
    address: str = _opt("--address", "Ray cluster address.", EXECUTION, shown="a local one"),
    workers: int = _opt("--workers", "Ray workers.", EXECUTION, "workers"),
    base_url: str = _opt(
        "--base-url",
        "OpenAI-compatible server of an openai: model.",
        EXECUTION,
        shown="$OPENAI_BASE_URL",
    ),
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
    plan.announce(cfg, out)
    started = time.monotonic()
    try:
        with progress_for() as bars:
            result = driver.run(cfg, out, bars)
    except driver.RunInterrupted as exc:
        raise Interrupted(str(exc)) from None
    _record_speed(cfg, result.stats, time.monotonic() - started)
    print_results(result, form)
    return judge_failures(result.judging, result.out)


def print_results(result: driver.RunResult, fmt: output.Format = "table") -> None:
    if fmt == "json":
        print(json.dumps({"cells": [c.to_json() for c in result.cells]}, indent=2))
    else:
        table = results.results_table(result.cells)
        output.emit(table, fmt, detail=results.DETAIL, key=results.KEY, keep=results.HEADLINE)
        generated = [c for c in result.cells if isinstance(c, GenerateCell)]
        for note in (results.corrected_note(generated), results.gf_note(generated)):
            if note:
                output.note(note, fmt)
    warning = results.truncation_warning(result.cells)
    if warning:
        output.note(warning, fmt)
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


def _record_speed(cfg: RunConfig, stats: driver.RunStats, seconds: float) -> None:
    """A one-model generate run stores its end-to-end speed for the next estimate."""
    if not probe_for(cfg).estimates_speed or len(cfg.models) != 1:
        return
    tokens = stats.extra.get("answer_completion_tokens", 0)
    tokens += stats.extra.get("user_completion_tokens", 0)
    speed.record(cfg.models[0], tokens, stats.answers_generated + stats.generated, seconds)


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
                rows.append([kind, name, f"named model ({spec})", "those of llamacpp"])
        for name, plugin in plugins.items():
            if kind == "judge" and name in ("llm", "cascade"):
                rows.append([kind, name, plugin.help, _llm_judge_options()])
                if name == "llm":
                    rows.append([kind, "openai", OPENAI_JUDGE, _llm_judge_options()])
                continue
            rows.append([kind, name, plugin.help, ", ".join(sorted(plugin.options))])
    cols = ["kind", "name", "what", "options (?key=value)"]
    output.emit(
        Table("list", "", cols, rows, rows), form, detail=(cols[-1],), key=cols[:2], wrap=(cols[2],)
    )
    return 0


OPENAI_JUDGE = "an OpenAI-compatible model as the judge: openai:MODEL (= llm:openai:MODEL)"


def _llm_judge_options() -> str:
    """An LLM judge takes its own options and those of its model's backend."""
    from userturn import registry

    return ", ".join(sorted(registry.JUDGE_LLM)) + "; and the model's (e.g. openai's)"


def _probe_command(probe: str, doc: str, extra: list[inspect.Parameter]) -> Any:
    """A command that is ``run --probe PROBE``, with every option of ``run`` (but
    --probe) in its own help, under its own usage line."""
    params = [p for name, p in inspect.signature(run).parameters.items() if name != "probe"]
    params[-1:-1] = extra

    def command(**kwargs: Any) -> int:
        if "user_temperature" in kwargs:  # the rollout command's own option
            kwargs["temperatures"] = _user_temperature(
                kwargs.pop("user_temperature"), kwargs["temperatures"], kwargs["config"]
            )
        return run(probe=probe, **kwargs)

    command.__doc__ = doc
    command.__name__ = probe
    command.__signature__ = inspect.Signature(params, return_annotation=int)  # type: ignore[attr-defined]
    hints = typing.get_type_hints(run)
    command.__annotations__ = {p.name: hints[p.name] for p in params if p.name in hints}
    command.__annotations__.update({p.name: p.annotation for p in extra})
    command.__annotations__["return"] = int
    return command


def _user_temperature(
    user: float | None, temperatures: str | None, config: Path | None
) -> str | None:
    """``--user-temperature T`` is ``--temperatures T``; without either (and no
    --config), user turns are sampled at T=1.0: a rollout at T=0 repeats one path."""
    if user is not None and temperatures is not None:
        raise UserError(
            "give --user-temperature or --temperatures, not both", field="--user-temperature"
        )
    if user is not None:
        return f"{user:g}"
    if temperatures is None and config is None:
        return "1.0"
    return temperatures


USER_TEMPERATURE = inspect.Parameter(
    "user_temperature",
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    default=typer.Option(
        None,
        "--user-temperature",
        help="Temperature of the user turns (answers use "
        "--answer-temperature); same as --temperatures T. [default: 1]",
        rich_help_panel=SAMPLING,
    ),
    annotation=float,
)
likelihood = _probe_command(
    "likelihood",
    """The judge-free likelihood probe: the real next user turn vs degenerate ones.

    Scores the real next user turn of each context against degenerate candidates under
    the model's own user header (held-out sets, MT-Bench, jsonl rows with reference_turn);
    the same as `run --probe likelihood`.
    """,
    [],
)
rollout = _probe_command(
    "rollout",
    """Multi-turn self-play: the model plays both sides for --turns user turns.

    The same as `run --probe rollout`, plus --user-temperature; --stop-on degenerate ends a
    conversation at its first degenerate user turn, --best-of N keeps the most genuine of
    N candidates.
    """,
    [USER_TEMPERATURE],
)


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("list")(list_cmd)
    app.command("likelihood")(likelihood)
    app.command("rollout")(rollout)
