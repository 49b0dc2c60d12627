"""``userturn judge``: label examples, judge a run's stored user turns, or write a
judge's card (``userturn judge card``)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import numpy as np
import typer

from userturn.analysis.cards import CARDS_DIR
from userturn.analysis.correction import CARD_KEYS, cell_error_draws
from userturn.analysis.tables import Table
from userturn.cli import output
from userturn.cli.io import Interrupted, atomic_lines, check_output
from userturn.datasets.base import check_messages, read_jsonl, require, require_id
from userturn.errors import UserError
from userturn.judges import Judge, load_judge, protocol
from userturn.judges.card import build_card, load_card, write_card
from userturn.run.judge_stage import FAILED_SHARE, JudgeTally, judge_rows
from userturn.run.outputs import write_outputs
from userturn.rundir.store import open_run
from userturn.types import JudgeInput

judge_app = typer.Typer(
    help="Label examples (--in/--out), add judgments to a run (--run), or write a card.",
    invoke_without_command=True,
)


def read_examples(path: Path) -> list[JudgeInput]:
    """``{"id", "messages", "user_turn"}`` lines; extra keys are ignored, never shown."""
    out, seen = [], set()
    for line, obj in read_jsonl(path):
        ex_id = require_id(obj, path, line)
        if ex_id in seen:  # a label file with two rows per id is one agree refuses
            raise UserError(f"duplicate id {ex_id!r}", file=str(path), line=line, field="id")
        seen.add(ex_id)
        messages = check_messages(obj.get("messages"), path, line)
        user_turn = require(obj, "user_turn", str, path, line)
        out.append(JudgeInput(id=ex_id, messages=messages, user_turn=user_turn))
    if not out:
        raise UserError("no examples (the file has no JSON lines)", file=str(path))
    return out


@judge_app.callback()
def judge(
    ctx: typer.Context,
    judge_spec: str = typer.Option(
        None,
        "--judge",
        help="Judge spec, required: offline, rules, llm:MODEL, openai:MODEL, cascade:MODEL.",
    ),
    in_path: Path = typer.Option(None, "--in", help="Examples JSONL."),
    out_path: Path = typer.Option(None, "--out", help="Labels JSONL to write."),
    run_dir: Path = typer.Option(None, "--run", help="Judge a run's user turns."),
    judge_base_url: str = typer.Option(None, "--judge-base-url", metavar="URL"),
    retry_failed: bool = typer.Option(
        False, "--retry-failed", help="With --run: re-judge only verdicts that are not ok."
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing --out."),
) -> int:
    """Label examples (--in/--out) or add judgments to a run (--run)."""
    if ctx.invoked_subcommand is not None:
        return 0
    if judge_spec is None:
        raise UserError("--judge is required", field="--judge")
    if (in_path is None) == (run_dir is None):
        raise UserError("give exactly one of --in or --run", field="--in")
    if in_path is not None:
        if out_path is None:
            raise UserError("--in needs --out", field="--out")
        check_output(out_path, inputs=[in_path], force=force, field="--out")
    judge_obj = load_judge(judge_spec, base_url=judge_base_url)
    try:
        if run_dir is not None:
            return _judge_run(run_dir, judge_obj, retry_failed)
        assert in_path is not None and out_path is not None
        return _judge_file(in_path, out_path, judge_obj)
    finally:
        judge_obj.close()


def _judge_file(in_path: Path, out_path: Path, judge_obj: Judge) -> int:
    examples = read_examples(in_path)
    verdicts = judge_obj.judge(examples)
    lines = [
        json.dumps({"id": ex.id, **{k: x for k, x in v.to_json().items() if k != "judge"}})
        for ex, v in zip(examples, verdicts, strict=True)
    ]
    atomic_lines(out_path, lines)
    failed = sum(v.status != "ok" for v in verdicts)
    typer.echo(f"wrote {len(verdicts)} labels to {out_path} ({failed} not ok)")
    return _exit_for(judge_obj.id, failed, len(verdicts))


def _judge_run(run_dir: Path, judge_obj: Judge, retry_failed: bool) -> int:
    with open_run(run_dir, writer="judge") as store:
        turns = list(store.user_turns())
        try:
            tally = judge_rows(store, [judge_obj], turns, retry_failed=retry_failed)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: every returned verdict is stored
            write_outputs(run_dir, store)
            raise Interrupted(
                f"interrupted: the verdicts returned so far are stored in {run_dir} "
                "(records.jsonl and summary.json cover them); run the same command to resume"
            ) from None
        write_outputs(run_dir, store)
        states = store.judgment_states(judge_obj.id).values()
        left = sum(v == judge_obj.version and s != "ok" for v, s in states)
    typer.echo(
        f"judged {tally.written} user turns ({tally.calls} model calls); "
        f"summary.json and records.jsonl updated in {run_dir}"
    )
    if left and not tally.failing():
        typer.echo(f"{left} verdicts of {judge_obj.id} are not ok; --retry-failed re-judges them")
    return _tally_exit(tally)


def _tally_exit(tally: JudgeTally) -> int:
    code = 0
    for judge_id, n in tally.judged.items():
        code = max(code, _exit_for(judge_id, tally.failed.get(judge_id, 0), n))
    return code


def _exit_for(judge_id: str, failed: int, n: int) -> int:
    """1 when the judge failed on most turns: an outage must not look like a result."""
    if n and failed / n > FAILED_SHARE:
        typer.echo(
            f"error: judge {judge_id} returned no verdict for {failed} of {n} turns; "
            "fix the judge and rerun with --retry-failed",
            err=True,
        )
        return 1
    return 0


BUILTIN = "builtin"


def builtin_references() -> list[Path]:
    """The reference sets shipped in the package (provenance: docs/reference-sets.md)."""
    folder = resources.files("userturn.judges").joinpath("reference")
    return [Path(str(folder.joinpath(name))) for name in protocol.REFERENCE_FILES]


def reference_files(raw: list[str]) -> tuple[list[Path], int | None]:
    """``--ref FILE`` (repeatable), ``--ref builtin`` (the five shipped sets) or
    ``--ref 'builtin?limit=N'`` (the first N rows of each: a quick, rough card)."""
    paths: list[Path] = []
    limit = None
    for text in raw:
        name, mark, query = text.partition("?")
        if name != BUILTIN:
            paths.append(Path(text))
            continue
        options = dict(parse_qsl(query, keep_blank_values=True)) if mark else {}
        unknown = sorted(set(options) - {"limit"})
        if unknown:
            raise UserError(
                f"unknown option {unknown[0]!r} of builtin (known: limit)", field="--ref"
            )
        if "limit" in options:
            value = options["limit"]
            if not value.isdigit() or int(value) < 1:
                raise UserError(
                    f"builtin?limit= expects an integer >= 1, got {value!r}", field="--ref"
                )
            limit = int(value)
        paths += builtin_references()
    return paths, limit


@judge_app.command("card")
def card(
    judge_spec: str = typer.Option(..., "--judge", help="Judge spec, e.g. offline."),
    refs: list[str] = typer.Option(
        None,
        "--ref",
        metavar="FILE|builtin",
        help="Reference labels (repeatable), judge_dev.jsonl format; 'builtin' is the five "
        "sets shipped with userturn (1,914 turns), 'builtin?limit=N' their first N rows each.",
    ),
    control: Path = typer.Option(None, "--control", help="A control set to score as well."),
    out: Path = typer.Option(
        None, "--out", help="Also write the card into this folder. [default: print only]"
    ),
    run_dir: Path = typer.Option(
        None, "--run", help="Write the card into this run (its cells get corrected rates)."
    ),
    judge_base_url: str = typer.Option(None, "--judge-base-url", metavar="URL"),
    fmt: str = typer.Option(
        "table", "--format", help="table (σ overall and per model and dataset) or json."
    ),
) -> int:
    """Print a judge's card: sensitivity and specificity with CIs, overall and per model
    and dataset of the reference turns. Built-in judges have one shipped; any other judge
    gets one measured now on --ref files (--ref builtin: the shipped reference sets). The
    card is written only with --out or --run."""
    if fmt not in ("table", "json"):
        raise UserError(f"expected table or json, got {fmt!r}", field="--format")
    if run_dir is not None and not run_dir.is_dir():
        raise UserError("run directory not found", file=str(run_dir))
    paths, limit = reference_files(list(refs or []))
    judge_obj = load_judge(judge_spec, base_url=judge_base_url)
    try:
        data = load_card(judge_obj.id, judge_obj.version) if not paths else None
        if data is None:
            if not paths:
                raise UserError(
                    f"judge {judge_obj.id} has no shipped card: measure one with --ref builtin "
                    "(or --ref FILE)",
                    field="--ref",
                )
            data = build_card(judge_obj, paths, control, limit=limit)
    finally:
        judge_obj.close()
    written = [write_card(data, folder) for folder in _card_folders(out, run_dir)]
    if fmt == "json":
        typer.echo(json.dumps(data, indent=1, ensure_ascii=False))
    else:
        output.emit(card_table(data), detail=(), key=("reference turns",))
        output.note(_card_note(data, written))
        pairs = pair_table(data)
        if pairs is None:
            output.note(NO_PAIRS)
        else:
            output.emit(pairs, key=("dataset", "model"))
    for path in written:
        typer.echo(f"wrote {path}", err=True)
    if run_dir is not None:  # the run's corrected rates use the new card from now on
        with open_run(run_dir, writer="judge card") as store:
            write_outputs(run_dir, store)
        typer.echo(f"updated {run_dir / 'summary.json'}", err=True)
    return 0


def _card_folders(out: Path | None, run_dir: Path | None) -> list[Path]:
    return ([out] if out is not None else []) + ([run_dir / CARDS_DIR] if run_dir else [])


def card_table(card: dict[str, Any]) -> Table:
    """σ of a card as rows: all reference turns, then each model and dataset stratum."""
    blocks = [("all", {k: card[k] for k in ("sigma", "sensitivity", "specificity")})]
    for field, groups in (card.get("strata") or {}).items():
        blocks += [(f"{field} {name}", block) for name, block in groups.items()]
    cols = ["reference turns", "n", "genuine (ref)", "judged genuine"]
    cols += ["sensitivity [95% CI]", "specificity [95% CI]"]
    rows = [_card_row(name, block) for name, block in blocks]
    return Table("card", f"judge card {card['card_id']}", cols, rows, rows)


def _card_row(name: str, block: dict[str, Any]) -> list[str]:
    s = block["sigma"]
    n = sum(s.values())
    ref, judged = s["tp"] + s["fn"], s["tp"] + s["fp"]
    return [name, str(n), f"{ref} ({ref / n:.0%})" if n else "0",
            f"{judged} ({judged / n:.0%})" if n else "0",
            _interval(block["sensitivity"]), _interval(block["specificity"])]  # fmt: skip


NEW = "(new)"
"""The name, in the pairs table, of a model or dataset the card has no turns from."""
NO_PAIRS = (
    "This card has no dataset × model counts (cards written before 2026-12-05): corrected "
    "rates shift its dataset stratum by the model's distance from the average model."
)


def pair_table(card: dict[str, Any], reps: int = 4000) -> Table | None:
    """What a run's corrected rate assumes, per dataset × model pair of the card: the
    pair's own reference counts beside the se and sp the correction draws for a run of
    that model on that dataset (``analysis.strata``: the joint fit, which shrinks a
    pair's few turns toward its dataset and model). Each dataset ends with a model the
    card lacks, whose draws are as wide as the card's models are apart, and the table
    with a dataset and model both new. None for a card without cross counts.

    Why: the card's own table is marginal, and on the shipped card the marginals are
    confounded (people wrote most ShareGPT turns), so a user reading it alone would pick
    the wrong se and sp for their run."""
    anchor = (card.get("strata") or {}).get("dataset") or {}
    if not anchor or any("by_model" not in entry for entry in anchor.values()):
        return None
    pairs = [(d, m) for d, e in sorted(anchor.items()) for m in [*sorted(e["by_model"]), NEW]]
    rows, shown, caveats = [], [], set()
    for dataset, model in [*pairs, (NEW, NEW)]:
        s = anchor.get(dataset, {}).get("by_model", {}).get(model) or dict.fromkeys(CARD_KEYS, 0)
        run = ["" if name == NEW else name for name in (dataset, model)]
        draws = cell_error_draws(card, run[0], run[1], reps=reps)
        caveats.add(draws.caveat)
        raw: list[Any] = [dataset, model, sum(s.values())]
        text = [dataset, model, str(sum(s.values()))]
        for x, n, d in ((s["tp"], s["tp"] + s["fn"], draws.sens),
                        (s["tn"], s["tn"] + s["fp"], draws.spec)):  # fmt: skip
            lo, hi = (float(v) for v in np.percentile(d, [2.5, 97.5]))
            raw += [x, n, float(d.mean()), lo, hi]
            text += [f"{x}/{n}" if n else "-", f"{d.mean():.2f} [{lo:.2f}, {hi:.2f}]"]
        rows.append(raw)
        shown.append(text)
    cols = ["dataset", "model", "turns", "se: card", "se: used [95%]", "sp: card"]
    cols += ["sp: used [95%]"]
    data = ["dataset", "model", "turns"]
    data += [
        f"{side}{k}" for side in ("se", "sp") for k in ("_right", "_turns", "", "_low", "_high")
    ]
    note = (
        f"{NEW}: a model or dataset the card has no turns from. card: the pair's reference"
        " turns the judge got right; used: the mean and 95% range of the draws a corrected"
        " rate takes for a run of that model on that dataset."
    )
    note += "".join(f" {c[0].upper()}{c[1:]}." for c in sorted(caveats) if c)
    title = "what corrected rates assume, per dataset × model (fit jointly)"
    return Table("card_pairs", title, cols, rows, shown, note, data)


def _interval(x: dict[str, float | None]) -> str:
    if x.get("value") is None:
        return "-"
    return f"{x['value']:.2f} [{x['ci_low']:.2f}, {x['ci_high']:.2f}]"


def _card_note(card: dict[str, Any], written: list[Path]) -> str:
    control = card.get("control_set") or {}
    said = f"method: {card['method']}."
    if control.get("n"):
        said += (
            f" Control set ({control['n']} planted turns): σ accuracy"
            f" {control['sigma_accuracy']}, label accuracy {control['label_accuracy']}."
        )
    where = f"in {written[0]} and " if written else ""
    return said + f" The label confusion and every count are {where}in --format json."


def register(app: typer.Typer) -> None:
    app.add_typer(judge_app, name="judge")
