"""Fixtures for the annotation tests (helpers live in annotate_helpers.py).

``store_run`` is a Store-API run with markers in every hidden field; ``real_run`` is made
by the real pipeline on the embedded model (3 held-out items, T=0 and T=1 with k=2, 16
user tokens; model file, dataset file, item ids and reference turns named by markers),
judged by the real rules judge plus a second judge written with the Store API.

Run: ``.venv/bin/python -m pytest tests/annotate -q``
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from annotate_helpers import ITEMS, add_second_judge, build_store_run

from userturn.rundir.store import STORE_NAME, Store


@pytest.fixture()
def store_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    build_store_run(run)
    return run


@pytest.fixture(scope="session")
def real_run(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from userturn.cli import main

    base = tmp_path_factory.mktemp("annotate_real")
    model = base / "zqxMODELMARK.gguf"
    model.symlink_to(smollm2_path)
    data = base / "zqxDATAMARK.jsonl"
    data.write_text("".join(json.dumps(i) + "\n" for i in ITEMS), encoding="utf-8")
    run = base / "run"
    # one thread: on a shared 2-core machine two llama.cpp threads spin on each other
    rc = main(
        [
            "run",
            "--model",
            f"llamacpp:{model}?n_threads=1",
            "--dataset",
            f"jsonl:{data}",
            "--limit",
            "3",
            "--temperatures",
            "0,1",
            "--samples",
            "2",
            "--max-user-tokens",
            "16",
            "--judge",
            "rules",
            "--out",
            str(run),
        ]
    )
    assert rc == 0, "the real pipeline run failed"
    store = Store(run / STORE_NAME)
    try:
        add_second_judge(store)
    finally:
        store.close()
    return run
