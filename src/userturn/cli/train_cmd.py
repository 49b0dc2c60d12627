"""``userturn train sft|dpo [--eval]`` and ``userturn export pairs``."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from userturn.cli import options
from userturn.errors import UserError

train_app = typer.Typer(
    help="Post-train a model to raise interaction awareness.", no_args_is_help=True
)
console = Console(highlight=False)


def _eval_options(
    ctx_from_run: Path | None,
    eval_config: Path | None,
    datasets: list[str] | None,
    limit: int | None,
    temperatures: str | None,
    samples: int | None,
    judges: list[str] | None,
) -> Any:
    from userturn.cli.options import floats
    from userturn.train.evaluate import eval_config as build

    return build(
        eval_config,
        ctx_from_run,
        {
            "datasets": datasets,
            "limit": limit,
            "samples": samples,
            "judges": judges,
            "temperatures": floats(temperatures, "eval-temperatures") if temperatures else None,
        },
    )


def _check_backend(model: str, backend: str, options: str | None) -> None:
    """Bad model or eval-backend flags fail before minutes of training, not after."""
    from userturn.train.common import eval_options, parse_train_model

    parse_train_model(model).base_spec(backend, eval_options(options))


def _print_result(result: Any) -> None:
    losses = [e["loss"] for e in result.losses]
    w = max(1, min(5, len(losses) // 2))  # single steps are noisy at small batch sizes
    first, last = (sum(losses[:w]) / w, sum(losses[-w:]) / w) if losses else (0.0, 0.0)
    console.print(
        f"{result.method}: {result.steps} steps in {result.seconds:.0f}s, mean loss of the "
        f"first/last {w} steps {first:.4f} -> {last:.4f}; saved to {result.out}"
    )
    console.print(f'run it: userturn run --model "{result.trained_spec}"')


def _run_eval(
    result: Any,
    cfg: Any,
    backend: str,
    options: str | None,
    before_dir: Path | None,
    train_items: list[str] | None,
) -> None:
    from userturn.train.common import eval_options, parse_train_model
    from userturn.train.evaluate import before_after

    spec, extra = parse_train_model(result.settings["model"]), eval_options(options)
    ba = before_after(
        cfg,
        spec.base_spec(backend, extra),
        spec.trained_spec(result.out, result.lora, backend, extra),
        result.out / "eval",
        before_dir=before_dir,
        train_items=train_items,
    )
    if ba.overlap:
        console.print(
            f"warning: {len(ba.overlap)} evaluation item(s) were used for training "
            f"(e.g. {ba.overlap[0]}); the 'after' rate is not held-out"
        )
    from userturn.cli import output

    output.emit(ba.table)
    console.print(
        f"before: {ba.before}  after: {ba.after}  (userturn compare {ba.before} {ba.after})"
    )


EVAL_HELP = "Afterwards, run the probe grid on the base and the trained model and compare."

# The evaluation flags, declared once for `train sft --eval`, `train dpo --eval` and
# `train eval`, so the three commands can't drift apart.
EvalConfigOpt = Annotated[
    Path | None,
    typer.Option("--eval-config", help="YAML grid (default for dpo/eval: the probe run's)."),
]
EvalDatasetOpt = Annotated[list[str] | None, typer.Option("--eval-dataset")]
EvalLimitOpt = Annotated[int | None, typer.Option("--eval-limit")]
EvalTemperaturesOpt = Annotated[str | None, typer.Option("--eval-temperatures")]
EvalSamplesOpt = Annotated[int | None, typer.Option("--eval-samples")]
EvalJudgeOpt = Annotated[list[str] | None, typer.Option("--eval-judge")]
EvalBeforeOpt = Annotated[Path | None, typer.Option("--eval-before", help="Reuse this base run.")]
EvalBackendOpt = Annotated[str, typer.Option("--eval-backend", help="hf | vllm")]
EvalOptionsOpt = Annotated[
    str | None,
    typer.Option("--eval-options", help="Backend options for the evaluation: batch=32, tp=2."),
]


def _settings(params: dict[str, Any], cls: Any, renames: dict[str, str] | None = None) -> Any:
    """A command's arguments as ``cls``'s fields (the ``--eval*`` ones are not)."""
    evals = [p for p in params if p == "run_eval" or p.startswith("eval_")]
    names = {f.name for f in dataclasses.fields(cls)}
    return options.by_name(params, names, renames=renames or {}, cli_only=evals)


@train_app.command("sft")
def sft(
    model: str = typer.Option(..., "--model", help="hf:ID_OR_PATH, or smollm2-135m."),
    data: str = typer.Option(..., "--data", help="sharegpt, sharegpt:PATH or a JSONL file."),
    loss_on: str = typer.Option(..., "--loss-on", help="assistant | user | both"),
    out: Path = typer.Option(..., "--out", help="Output folder (adapter + train.json)."),
    lora: bool = typer.Option(True, "--lora/--no-lora", help="LoRA adapter or full model."),
    max_steps: int = typer.Option(50, "--max-steps"),
    max_examples: int = typer.Option(256, "--max-examples"),
    max_length: int = typer.Option(512, "--max-length", help="Tokens per example."),
    batch_size: int = typer.Option(4, "--batch-size"),
    grad_accum: int = typer.Option(1, "--grad-accum"),
    learning_rate: float = typer.Option(2e-4, "--learning-rate"),
    seed: int = typer.Option(0, "--seed"),
    run_eval: bool = typer.Option(False, "--eval", help=EVAL_HELP),
    eval_config: EvalConfigOpt = None,
    eval_dataset: EvalDatasetOpt = None,
    eval_limit: EvalLimitOpt = None,
    eval_temperatures: EvalTemperaturesOpt = None,
    eval_samples: EvalSamplesOpt = None,
    eval_judge: EvalJudgeOpt = None,
    eval_before: EvalBeforeOpt = None,
    eval_backend: EvalBackendOpt = "hf",
    eval_opts: EvalOptionsOpt = None,
) -> int:
    """SFT on multi-turn conversations with the loss on user, assistant or both turns."""
    params = dict(locals())  # the options, by name, before anything else is bound
    from userturn.train.sft import SFTSettings, train_sft

    settings = SFTSettings(**_settings(params, SFTSettings))
    settings.check()
    _check_backend(model, eval_backend, eval_opts)
    cfg = (
        _eval_options(
            None, eval_config, eval_dataset, eval_limit, eval_temperatures, eval_samples, eval_judge
        )
        if run_eval
        else None
    )
    result = train_sft(settings)
    _print_result(result)
    if cfg is not None:
        _run_eval(result, cfg, eval_backend, eval_opts, eval_before, None)
    return 0


@train_app.command("dpo")
def dpo(
    model: str = typer.Option(..., "--model", help="hf:ID_OR_PATH, or smollm2-135m."),
    out: Path = typer.Option(..., "--out", help="Output folder (adapter + train.json)."),
    from_run: Path = typer.Option(None, "--from-run", help="Probe run (T>0, k>1)."),
    pairs: Path = typer.Option(None, "--pairs", help="Or: a pairs JSONL (export pairs)."),
    judge: str = typer.Option(None, "--judge", help="Judge whose verdicts split the pairs."),
    lora: bool = typer.Option(True, "--lora/--no-lora"),
    max_steps: int = typer.Option(30, "--max-steps"),
    max_pairs_per_context: int = typer.Option(4, "--max-pairs-per-context"),
    max_length: int = typer.Option(768, "--max-length"),
    batch_size: int = typer.Option(2, "--batch-size"),
    grad_accum: int = typer.Option(1, "--grad-accum"),
    learning_rate: float = typer.Option(5e-5, "--learning-rate"),
    beta: float = typer.Option(0.1, "--beta"),
    seed: int = typer.Option(0, "--seed"),
    run_eval: bool = typer.Option(False, "--eval", help=EVAL_HELP),
    eval_config: EvalConfigOpt = None,
    eval_dataset: EvalDatasetOpt = None,
    eval_limit: EvalLimitOpt = None,
    eval_temperatures: EvalTemperaturesOpt = None,
    eval_samples: EvalSamplesOpt = None,
    eval_judge: EvalJudgeOpt = None,
    eval_before: EvalBeforeOpt = None,
    eval_backend: EvalBackendOpt = "hf",
    eval_opts: EvalOptionsOpt = None,
) -> int:
    """DPO on self-play pairs: genuine vs degenerate user turns of the same context."""
    params = dict(locals())  # the options, by name, before anything else is bound
    from userturn.train.dpo import DPOSettings, train_dpo

    settings = DPOSettings(**_settings(params, DPOSettings, {"pairs": "pairs_file"}))
    settings.check()
    _check_backend(model, eval_backend, eval_opts)
    cfg = (
        _eval_options(
            from_run,
            eval_config,
            eval_dataset,
            eval_limit,
            eval_temperatures,
            eval_samples,
            eval_judge,
        )
        if run_eval
        else None
    )
    result = train_dpo(settings)
    _print_result(result)
    if cfg is not None:
        _run_eval(
            result, cfg, eval_backend, eval_opts, eval_before, list(result.data.get("items") or [])
        )
    return 0


@train_app.command("eval")
def eval_trained(
    trained: Path = typer.Option(..., "--trained", help="A train sft/dpo output folder."),
    eval_config: EvalConfigOpt = None,
    eval_dataset: EvalDatasetOpt = None,
    eval_limit: EvalLimitOpt = None,
    eval_temperatures: EvalTemperaturesOpt = None,
    eval_samples: EvalSamplesOpt = None,
    eval_judge: EvalJudgeOpt = None,
    eval_before: EvalBeforeOpt = None,
    eval_backend: EvalBackendOpt = "hf",
    eval_opts: EvalOptionsOpt = None,
) -> int:
    """The --eval step alone, for a model trained earlier (resumes its runs)."""
    from userturn.train.common import TrainResult

    result = TrainResult.read(trained)
    _check_backend(result.settings["model"], eval_backend, eval_opts)
    from_run = result.data.get("from_run")
    cfg = _eval_options(
        Path(from_run) if from_run else None,
        eval_config,
        eval_dataset,
        eval_limit,
        eval_temperatures,
        eval_samples,
        eval_judge,
    )
    items = list(result.data.get("items") or []) or None
    _run_eval(result, cfg, eval_backend, eval_opts, eval_before, items)
    return 0


def export_pairs(
    run_dir: Path = typer.Option(..., "--run", help="Probe run directory."),
    out: Path = typer.Option(..., "--out", help="Pairs file (JSONL) to write."),
    judge: str = typer.Option(None, "--judge", help="Judge (default: the run's only one)."),
    max_per_context: int = typer.Option(4, "--max-per-context"),
) -> int:
    """Self-play preference pairs (genuine vs not, same context, same judge) as JSONL."""
    from userturn.train.pairs import pairs_from_run, write_pairs

    if max_per_context < 1:
        raise UserError("must be >= 1", field="--max-per-context")
    _check_generated(run_dir)
    pairs, stats, used = pairs_from_run(run_dir, judge, max_per_context=max_per_context)
    write_pairs(pairs, out)
    console.print(
        f"wrote {stats.pairs} pairs to {out} (judge {used}: {stats.contexts} "
        f"contexts, {stats.with_both} with both sides; {stats.genuine} genuine, "
        f"{stats.rejected} not, {stats.not_ok} not ok)"
    )
    return 0


def _check_generated(run_dir: Path) -> None:
    """A likelihood run scores given turns and generates none: there is nothing to pair,
    and "pick one with --judge" would send its user looking for a judge that never ran."""
    from userturn.rundir.store import open_run

    with open_run(run_dir) as store:
        if store.count_user_turns() == 0 and store.likelihood_keys():
            raise UserError(
                "a likelihood-probe run: it scores the real next turns and generates no "
                "user turns, so it has no genuine vs not-genuine pairs; export pairs from a "
                "`userturn run` (T>0, --samples > 1) instead",
                file=str(run_dir),
            )


def _export_app() -> typer.Typer:
    """The shared ``export`` group; a local one only in a build without export_cmd."""
    if importlib.util.find_spec("userturn.cli.export_cmd") is not None:
        from userturn.cli.export_cmd import export_app

        return export_app
    return typer.Typer(help="Export a run's data as files.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(train_app, name="train")
    export = _export_app()
    export.command("pairs")(export_pairs)
    if importlib.util.find_spec("userturn.cli.export_cmd") is None:
        app.add_typer(export, name="export")
