"""``userturn export inspect``: inspect_ai reads every log back with the run's counts and rates.

The run is a synthetic grid in the real Store (3 models x 2 datasets, 3 temperatures,
k=3, two perturbations, unparseable verdicts) and a likelihood run on the scripted
``fake:`` backend. The logs are read with inspect's own ``read_eval_log`` and
``list_eval_logs``; every cell's rate is recomputed from the samples' scores and must
equal summary.json's.

Needs the ``[inspect]`` extra. Run: ``.venv/bin/python -m pytest tests/test_inspect_export.py -q``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from synthetic_runs import Spec, build_run
from userturn.cli import main

inspect_log = pytest.importorskip("inspect_ai.log")


def _summary(run: Path) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = json.loads((run / "summary.json").read_text())["cells"]
    return cells


def _records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "records.jsonl").open()]


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("inspect")
    run = build_run(root / "run", Spec(items=3))
    logs = root / "logs"
    assert main(["export", "inspect", "--run", str(run), "--out", str(logs)]) == 0
    return run, logs


def test_one_log_per_model_and_dataset_with_every_record(grid: tuple[Path, Path]) -> None:
    run, logs = grid
    recs = _records(run)
    by_group: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in recs:
        by_group[(r["model"], r["dataset"])].append(r)
    infos = inspect_log.list_eval_logs(str(logs))
    assert len(infos) == len(by_group) == 6
    seen = set()
    for info in infos:
        log = inspect_log.read_eval_log(info)
        key = (log.eval.model, log.eval.dataset.name)
        seen.add(key)
        want = by_group[key]
        assert log.status == "success"
        assert log.samples is not None and len(log.samples) == len(want)
        assert log.results is not None and log.results.total_samples == len(want)
        by_id = {r["id"]: r for r in want}
        assert sorted(str(s.id) for s in log.samples) == sorted(by_id)  # inspect sorts them
        for s in log.samples:
            r = by_id[str(s.id)]
            # context, answer as the model saw it, and the generated user turn
            assert [m.role for m in s.messages] == [m["role"] for m in r["messages"]] + ["user"]
            assert s.messages[-1].source == "generate"
            assert s.messages[-1].text == r["user_turn"] == s.output.completion
            assert s.messages[-2].text == r["messages"][-1]["content"]
            assert len(s.input) == len(r["messages"]) - 1
            assert s.metadata["temperature"] == r["temperature"]
            assert s.metadata["judgments"] == r["judgments"]
        meta = log.eval.metadata["userturn"]
        assert meta["probe"] == "generate"
        assert meta["config"] == {}  # a synthetic run has no manifest
        assert meta["judge_cards"] == {}  # synthetic verdicts carry no judge version
    assert seen == set(by_group)


def test_rates_recomputed_from_the_samples_match_summary(grid: tuple[Path, Path]) -> None:
    run, logs = grid
    cells = [c for c in _summary(run) if c["probe"] == "generate"]
    checked = 0
    for info in inspect_log.list_eval_logs(str(logs)):
        log = inspect_log.read_eval_log(info)
        assert log.results is not None and log.samples is not None
        (score,) = log.results.scores
        assert score.name == "rules"
        failed = [s for s in log.samples if s.metadata["judgments"][0]["status"] != "ok"]
        assert score.unscored_samples == len(failed) > 0
        assert all(not s.scores for s in failed)  # unparseable is no score, never a 0
        for c in cells:
            if (c["model"], c["dataset"]) != (log.eval.model, log.eval.dataset.name):
                continue
            mine = [
                s
                for s in log.samples
                if s.metadata["temperature"] == c["temperature"]
                and s.metadata["perturbation"] == c["perturbation"]
            ]
            values = [s.scores["rules"].value for s in mine if s.scores]
            assert len(mine) == c["n_total"] and len(values) == c["n"]
            assert sum(values) == c["genuine"]
            sfx = f"[T={c['temperature']:g},{c['perturbation']}]"
            assert sum(values) / len(values) == pytest.approx(c["rate"])
            assert score.metrics[f"rate{sfx}"].value == pytest.approx(c["rate"])
            assert score.metrics[f"ci_low{sfx}"].value == pytest.approx(c["ci_low"])
            assert score.metrics[f"unparseable{sfx}"].value == c["unparseable"] + c["errors"]
            checked += 1
    assert checked == len(cells) == 3 * 2 * 3 * 2


def test_a_real_run_carries_its_config_and_card(tmp_path: Path) -> None:
    """A run on the scripted backend, judged by the rules judge (which ships a card):
    the log's metadata holds the manifest's config and the card, and the corrected
    rate is a metric."""
    run = tmp_path / "gen"
    argv = ["run", "--model", "fake:x", "--dataset", "gsm8k", "--limit", "3"]
    assert main([*argv, "--temperatures", "0", "--judge", "rules", "--out", str(run)]) == 0
    assert main(["export", "inspect", "--run", str(run), "--out", str(tmp_path / "logs")]) == 0
    (info,) = inspect_log.list_eval_logs(str(tmp_path / "logs"))
    log = inspect_log.read_eval_log(info)
    meta = log.eval.metadata["userturn"]
    assert meta["config"]["judges"] == ["rules"] and meta["config"]["limit"] == 3
    assert meta["judge_cards"]["rules"]["sigma"]["tp"] >= 0
    (cell,) = _summary(run)
    assert cell["judge_card"] is not None and cell["rate_corrected"] is not None
    assert log.results is not None
    metrics = log.results.scores[0].metrics
    assert metrics["rate_corrected[T=0,none]"].value == pytest.approx(cell["rate_corrected"])
    assert log.samples is not None and len(log.samples) == cell["n_total"] == 3


def test_likelihood_run_round_trips(tmp_path: Path) -> None:
    run = tmp_path / "lik"
    argv = ["likelihood", "--model", "fake:x", "--dataset", "healthbench", "--limit", "3"]
    assert main([*argv, "--out", str(run)]) == 0
    assert main(["export", "inspect", "--run", str(run), "--out", str(tmp_path / "logs")]) == 0
    (info,) = inspect_log.list_eval_logs(str(tmp_path / "logs"))
    log = inspect_log.read_eval_log(info)
    recs = _records(run)
    (cell,) = _summary(run)
    assert log.samples is not None and len(log.samples) == len(recs) == 3
    by_id = {r["id"]: r for r in recs}
    values = {str(s.id): s.scores["likelihood"].value for s in log.samples if s.scores}
    scored = {k: r for k, r in by_id.items() if r["candidates"]}  # left-out copies: no score
    assert values == {k: 1 if r["prefers_real"] else 0 for k, r in scored.items()}
    assert log.results is not None
    metrics = log.results.scores[0].metrics
    assert metrics["preferred[none]"].value == pytest.approx(cell["preference_accuracy"])
    assert metrics["margin[none]"].value == pytest.approx(cell["margin"])
    assert log.eval.metadata["userturn"]["config"]["probe"] == "likelihood"


def test_bad_outputs_are_one_line_errors(
    grid: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, logs = grid
    capsys.readouterr()
    assert main(["export", "inspect", "--run", str(run), "--out", str(logs)]) == 2
    assert "already holds .eval logs; pass --force" in capsys.readouterr().err
    assert main(["export", "inspect", "--run", str(run), "--out", str(logs), "--force"]) == 0
    a_file = tmp_path / "f.txt"
    a_file.write_text("x")
    assert main(["export", "inspect", "--run", str(run), "--out", str(a_file)]) == 2
    assert "is a file, expected a log directory" in capsys.readouterr().err
    assert main(["export", "inspect", "--run", str(run), "--out", str(run)]) == 2
    assert main(["export", "inspect", "--run", str(tmp_path / "nope"), "--out", str(logs)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and err.startswith("error: ")
