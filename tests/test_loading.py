"""``userturn.load_run``: records as a DataFrame from parquet, jsonl or the store.

Run: ``.venv/bin/python -m pytest tests/test_loading.py -q`` (a few seconds, no model).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import userturn
from synthetic_runs import Spec, build_run
from userturn.errors import UserError


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = Spec(items=3, judges=("rules", "llm:x"))
    return build_run(tmp_path_factory.mktemp("run"), spec)


def _expected_rows() -> int:
    s = Spec(items=3)
    return len(s.models) * len(s.datasets) * s.items * len(s.perts) * (1 + 2 * s.k)


def test_load_run_from_parquet_has_judge_columns(run: Path) -> None:
    assert (run / "records.parquet").is_file()
    df = userturn.load_run(run)
    assert len(df) == _expected_rows()
    for judge in ("rules", "llm:x"):
        assert {f"{judge}/genuine", f"{judge}/label", f"{judge}/status"} <= set(df.columns)
    assert isinstance(df.loc[0, "messages"], list) and isinstance(df.loc[0, "judgments"], list)
    bad = df[df["rules/status"] == "unparseable"]
    assert len(bad) > 0 and bad["rules/genuine"].isna().all()
    rates = df.groupby("temperature")["rules/genuine"].mean()
    assert set(rates.index) == {0.0, 0.7, 1.0}


@pytest.mark.parametrize("keep", ["records.jsonl", "store.sqlite"])
def test_load_run_fallbacks_agree(run: Path, tmp_path: Path, keep: str) -> None:
    (tmp_path / keep).write_bytes((run / keep).read_bytes())
    df = userturn.load_run(tmp_path)
    ref = userturn.load_run(run)
    assert len(df) == len(ref)
    assert sorted(df["id"]) == sorted(ref["id"])
    assert df["rules/label"].value_counts().to_dict() == ref["rules/label"].value_counts().to_dict()


def test_load_run_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="run directory not found"):
        userturn.load_run(tmp_path / "nope")
    with pytest.raises(UserError, match="not a run directory"):
        userturn.load_run(tmp_path)
    with pytest.raises(AttributeError):
        _ = userturn.no_such_thing  # type: ignore[attr-defined]
