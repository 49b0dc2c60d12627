"""``userturn judge``: label arbitrary examples, or a run's stored user turns."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from userturn.datasets.base import check_messages, read_jsonl, require
from userturn.errors import UserError
from userturn.export import STORE_NAME, write_outputs
from userturn.judges import load_judge
from userturn.judging import judge_rows
from userturn.store import Store
from userturn.types import JudgeInput


def read_examples(path: Path) -> list[JudgeInput]:
    """``{"id", "messages", "user_turn"}`` lines; extra keys are ignored, never shown."""
    out = []
    for line, obj in read_jsonl(path):
        ex_id = str(require(obj, "id", (str, int), path, line))  # type: ignore[arg-type]
        messages = check_messages(obj.get("messages"), path, line)
        user_turn = require(obj, "user_turn", str, path, line)
        out.append(JudgeInput(id=ex_id, messages=messages, user_turn=user_turn))
    return out


def judge(
    judge_spec: str = typer.Option(..., "--judge", help="Judge spec."),
    in_path: Path = typer.Option(None, "--in", help="Examples JSONL."),
    out_path: Path = typer.Option(None, "--out", help="Labels JSONL."),
    run_dir: Path = typer.Option(None, "--run", help="Judge a run's user turns."),
    judge_base_url: str = typer.Option(None, "--judge-base-url"),
) -> int:
    """Label examples (--in/--out) or add judgments to a run (--run)."""
    if (in_path is None) == (run_dir is None):
        raise UserError("give exactly one of --in or --run", field="in")
    judge_obj = load_judge(judge_spec, base_url=judge_base_url)
    try:
        if run_dir is not None:
            return _judge_run(run_dir, judge_obj)
        if out_path is None:
            raise UserError("--in needs --out", field="out")
        examples = read_examples(in_path)
        verdicts = judge_obj.judge(examples)
        with out_path.open("w", encoding="utf-8") as f:
            for ex, v in zip(examples, verdicts, strict=True):
                rec = {"id": ex.id, **{k: x for k, x in v.to_json().items() if k != "judge"}}
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        typer.echo(f"wrote {len(verdicts)} labels to {out_path}")
        return 0
    finally:
        judge_obj.close()


def _judge_run(run_dir: Path, judge_obj: object) -> int:
    db = run_dir / STORE_NAME
    if not db.is_file():
        raise UserError("not a run directory (no store.sqlite)", file=str(run_dir))
    store = Store(db)
    try:
        rows = list(store.user_turns())
        written, calls = judge_rows(store, [judge_obj], rows)  # type: ignore[list-item]
        write_outputs(run_dir, store)
    finally:
        store.close()
    typer.echo(
        f"judged {written} user turns ({calls} model calls); "
        f"summary.json and records.jsonl updated in {run_dir}"
    )
    return 0


def register(app: typer.Typer) -> None:
    app.command("judge")(judge)
