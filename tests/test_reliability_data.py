"""What a run directory is made of stays what it was: a dataset changed under its name
is refused on resume (it would add its contexts to the old cells), and records.parquet
is written beside, then renamed, so a kill mid-write can't leave it damaged; one that
is damaged anyway (an older version, a copy cut short) is read past with a warning.
Run: ``.venv/bin/python -m pytest tests/test_reliability_data.py -q``
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reliability_helpers import write_items
from userturn.analysis.loading import load_run
from userturn.cli import main
from userturn.rundir.store import open_run

pq = pytest.importorskip("pyarrow.parquet")


def _args(data: Path, out: Path, *more: str) -> list[str]:
    gen = ["run", "--model", "fake:i", "--dataset", f"jsonl:{data}", "--temperatures", "0"]
    return [*gen, "--judge", "rules", "--out", str(out), *more]


def _error(capfd: pytest.CaptureFixture[str]) -> str:
    err = capfd.readouterr().err
    (line,) = [x for x in err.strip().splitlines() if not x.startswith("progress ")]
    assert "Traceback" not in err
    return line


@pytest.mark.parametrize("how", ["edited", "another file of the same name"])
def test_changed_data_under_the_same_name_is_refused(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], how: str
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    data = write_items(tmp_path / "a" / "items.jsonl", 3)
    out = tmp_path / "run"
    assert main(_args(data, out)) == 0
    with open_run(out) as store:
        before = store.count_records()
    if how == "edited":
        write_items(data, 3, tag="(now with a typo fixed)")
    else:
        data = write_items(tmp_path / "b" / "items.jsonl", 3, tag="(other data)")
    capfd.readouterr()
    assert main(_args(data, out)) == 2
    line = _error(capfd)
    assert line.startswith(
        f"error: {out}: field 'dataset': dataset 'jsonl:items.jsonl' is not the data"
    )
    assert "item 'q0' and 2 more changed" in line and "use another --out" in line
    with open_run(out) as store:
        assert store.count_records() == before  # nothing added to the old cells


def test_more_items_of_the_same_data_resume(tmp_path: Path) -> None:
    data = write_items(tmp_path / "items.jsonl", 4)
    out = tmp_path / "run"
    assert main(_args(data, out, "--limit", "2")) == 0
    assert main(_args(data, out)) == 0  # the same file, two more items: not a change
    stats = json.loads((out / "run_stats.json").read_text())
    assert stats["reused"] == 2 and stats["generated"] == 2


def test_load_run_reads_past_a_damaged_parquet(tmp_path: Path) -> None:
    data = write_items(tmp_path / "items.jsonl", 3)
    out = tmp_path / "run"
    assert main(_args(data, out)) == 0
    good = load_run(out)
    for damage in (b"", b"PAR1 cut short"):
        (out / "records.parquet").write_bytes(damage)
        with pytest.warns(UserWarning, match="not a readable Parquet file"):
            df = load_run(out)
        assert list(df["id"]) == list(good["id"])
        assert list(df["rules/label"]) == list(good["rules/label"])


def test_a_kill_while_parquet_is_written_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = write_items(tmp_path / "items.jsonl", 3)
    out = tmp_path / "run"
    assert main(_args(data, out, "--limit", "2")) == 0
    old = (out / "records.parquet").read_bytes()
    real = pq.write_table

    def killed(table: object, where: object, **kw: object) -> None:
        real(table, where, **kw)
        Path(str(where)).write_bytes(b"PAR1")  # cut short, then the process dies
        raise KeyboardInterrupt

    monkeypatch.setattr(pq, "write_table", killed)
    assert main(["judge", "--run", str(out), "--judge", "offline"]) != 0
    assert (out / "records.parquet").read_bytes() == old
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
    monkeypatch.setattr(pq, "write_table", real)
    assert len(load_run(out)) == 2
