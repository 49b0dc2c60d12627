"""Row readers and the bad-row policy: line numbers, salvage parsing of a truncated JSON
array, CSV records spanning lines, and HF ``datasets`` on local files offline.

Run: ``.venv/bin/python -m pytest tests/datasets/test_dataset_rows.py -q``
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from userturn import assets
from userturn.datasets import _rows as rows_module
from userturn.datasets._rows import BadRows, csv_rows, json_array_rows, jsonl_rows
from userturn.datasets.sources import SHAREGPT
from userturn.errors import UserError

FIXTURES = Path(__file__).parent / "fixtures"


def test_jsonl_bad_line_is_a_row_with_its_error_and_reading_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n{broken\n[1, 2]\n{"a": 4}\n')
    rows = list(jsonl_rows(path))
    assert [(r.line, r.error is None) for r in rows] == [
        (1, True),
        (3, False),
        (4, False),
        (5, True),
    ]
    assert str(rows[1].error).startswith(f"{path}:3: invalid JSON")


def test_truncated_json_array_keeps_every_complete_record() -> None:
    rows = list(json_array_rows(FIXTURES / "sharegpt_truncated.json"))
    assert [r.data["id"] for r in rows] == ["fixA_0", "fixB_1", "fixC_0", "fixD_0", "fixE_0"]
    assert [r.line for r in rows] == [2, 11, 18, 22, 29]  # where each record starts


def test_json_array_is_read_lazily_on_the_real_sharegpt_mirror(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The 125 MB mirror: the first records come back after reading about one chunk."""
    path = assets.fetch(SHAREGPT)
    read = []
    real_open = rows_module._open

    class Counting:
        def __init__(self, f: Any) -> None:
            self.f = f

        def read(self, n: int) -> str:
            chunk = str(self.f.read(n))
            read.append(len(chunk))
            return chunk

        def __enter__(self) -> Counting:
            return self

        def __exit__(self, *exc: object) -> None:
            self.f.close()

    monkeypatch.setattr(rows_module, "_open", lambda p, newline=None: Counting(real_open(p)))
    first = list(itertools.islice(json_array_rows(path), 3))
    assert [r.data["id"] for r in first] == ["QWJhYvA_0", "i6IyJda_0", "A5AbcES_0"]
    assert [r.line for r in first] == [2, 55, 68]
    assert sum(read) <= 2 * rows_module._CHUNK < path.stat().st_size // 50


def test_csv_line_numbers_follow_multiline_records() -> None:
    rows = list(csv_rows(FIXTURES / "gpqa_diamond.csv"))
    assert [r.line for r in rows] == [2, 3, 4, 6]
    assert rows[2].data["Question"].startswith("A question written over\ntwo lines")


def test_bad_rows_raise_or_count_and_warn_once(caplog: pytest.LogCaptureFixture) -> None:
    err = UserError("missing", file="f.jsonl", line=3, field="id")
    with pytest.raises(UserError):
        BadRows("demo", skip=False).handle(err)
    bad = BadRows("demo", skip=True)
    with caplog.at_level(logging.WARNING):
        bad.handle(err)
        bad.handle(UserError("other", file="f.jsonl", line=9))
        bad.report()
    assert bad.count == 2
    assert [r.getMessage() for r in caplog.records] == [
        "demo: skipped 2 bad row(s) (--skip-bad-rows); first: f.jsonl:3: field 'id': missing"
    ]


def test_hf_datasets_path_on_local_parquet_offline(tmp_path: Path) -> None:
    """The Hub code path (``datasets.load_dataset``) run on a local parquet file with
    ``HF_DATASETS_OFFLINE=1``, through the CLI-facing loader (``gsm8k:FILE.parquet``)."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "test-00000-of-00001.parquet"
    pq.write_table(
        pa.Table.from_pylist(
            [
                {
                    "question": "Tom has 3 apples and buys 4 more. How many now?",
                    "answer": "3 + 4 = <<3+4=7>>7\n#### 7",
                },
                {
                    "question": "A box holds 12 eggs. How many eggs in 2 boxes?",
                    "answer": "12 * 2 = <<12*2=24>>24\n#### 24",
                },
            ]
        ),
        path,
    )
    code = (
        "import json, sys\nfrom userturn.datasets import load_dataset\n"
        "items = load_dataset(sys.argv[1]).load()\n"
        "print(json.dumps([[i.id, i.reference['answer'][-2:]] for i in items]))"
    )
    env = {
        **os.environ,
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_CACHE": str(tmp_path / "hf-cache"),
    }
    proc = subprocess.run(
        [sys.executable, "-c", code, f"gsm8k:{path}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [
        ["gsm8k-0", " 7"],
        ["gsm8k-1", "24"],
    ]
