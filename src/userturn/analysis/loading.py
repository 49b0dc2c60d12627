"""``userturn.load_run(DIR)``: a run's records as a pandas DataFrame, for notebooks.

One row per user turn, in the ``records.jsonl`` shape, read from
``records.parquet`` when it exists and reads (fast, typed), else ``records.jsonl`` (with a
warning if the Parquet file was damaged), else straight from the run's store.
``messages`` and ``judgments`` are Python lists again (Parquet stores them as JSON text).
For each judge in the run three flat columns are added, ``<judge>/genuine``,
``<judge>/label`` and ``<judge>/status``, so that
``df.groupby(["model", "temperature"])["rules/genuine"].mean()`` just works; a turn a
judge did not judge has ``<judge>/status`` None, and an unparseable verdict has
``genuine`` None, never False.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from userturn.errors import UserError

if TYPE_CHECKING:
    import pandas as pd

JSON_COLUMNS = (
    "messages",
    "judgments",
    "candidates",
    "perturbation_detail",
    "answer_gold",
    "answer_score",
)
"""Nested values that records.parquet keeps as JSON text."""


def _pandas() -> Any:
    try:
        import pandas as pd
    except ModuleNotFoundError as exc:
        raise UserError("load_run needs pandas: pip install 'userturn[report]'") from exc
    return pd


def _read_records(run_dir: Path) -> list[dict[str, Any]]:
    from userturn.rundir.store import STORE_NAME

    parquet, jsonl, store = (
        run_dir / "records.parquet",
        run_dir / "records.jsonl",
        run_dir / STORE_NAME,
    )
    if parquet.is_file():
        rows = _read_parquet(parquet)
        if rows is not None:
            return rows
    if jsonl.is_file():
        with jsonl.open(encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    if store.is_file():
        from userturn.rundir.lines import iter_records
        from userturn.rundir.store import open_run

        with open_run(run_dir) as st:
            return list(iter_records(st))
    raise UserError(
        "not a run directory (no records.parquet, records.jsonl or store.sqlite)", file=str(run_dir)
    )


def _read_parquet(path: Path) -> list[dict[str, Any]] | None:
    """records.parquet's rows, or None (with a warning) when pyarrow is missing or the
    file is damaged: a 0-byte or cut file, say from a crash of an older userturn that
    wrote it in place. records.jsonl and the store hold the same rows."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ModuleNotFoundError:
        return None
    try:
        rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    except (pa.ArrowException, OSError) as exc:
        warnings.warn(
            f"{path}: not a readable Parquet file ({str(exc).splitlines()[0]}); "
            "reading records.jsonl instead",
            stacklevel=4,
        )
        return None
    for row in rows:
        for col in JSON_COLUMNS:
            if isinstance(row.get(col), str):
                row[col] = json.loads(row[col])
    return rows


def _judge_columns(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    judges = list(dict.fromkeys(j["judge"] for r in rows for j in r.get("judgments") or []))
    for r in rows:
        by = {j["judge"]: j for j in r.get("judgments") or []}
        for judge in judges:
            j = by.get(judge, {})
            r[f"{judge}/genuine"] = j.get("genuine_followup")
            r[f"{judge}/label"] = j.get("label")
            r[f"{judge}/status"] = j.get("status")
    return rows


def load_run(run_dir: str | Path) -> pd.DataFrame:
    """Load a run directory's records into a DataFrame (one row per user turn).

    Args:
        run_dir: the ``--out`` directory of ``userturn run``.

    Returns:
        A DataFrame with the records.jsonl columns plus ``<judge>/genuine``,
        ``<judge>/label`` and ``<judge>/status`` for every judge in the run.
    """
    pandas = _pandas()
    path = Path(run_dir)
    if not path.is_dir():
        raise UserError("run directory not found", file=str(path))
    rows = _judge_columns(_read_records(path))
    df: pd.DataFrame = pandas.DataFrame(rows)
    return df
