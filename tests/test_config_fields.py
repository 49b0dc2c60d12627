"""Every RunConfig field is placed once: in the fingerprint, a selection, or cosmetic.

Run: ``.venv/bin/python -m pytest tests/test_config_fields.py -q`` (seconds; the rollout
repro uses the scripted ``fake:`` backend). A new RunConfig option that changes what is
generated or judged must enter the fingerprint, or rows made with and without it pool
into one cell (``best_of`` and ``stop_on`` once did).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from userturn.analysis.cell import cell_from_json
from userturn.cli import main
from userturn.config import FIELD_ROLES, FINGERPRINT, SELECTION, RunConfig, build_config
from userturn.rundir.store import Store

ROLLOUT = {"probe": "rollout", "temperatures": [1.0], "judges": ["offline", "rules"]}
CHANGED: dict[str, Any] = {
    "seed": 7,
    "max_answer_tokens": 9,
    "max_user_tokens": 9,
    "answer_temperature": 0.5,
    "top_p": 0.5,
    "top_k": 5,
    "system_prompt": "be brief",
    "bos_token": "<s>",
    "eos_token": "</s>",
    "chat_template_kwargs": {"enable_thinking": False},
    "history_reasoning": "strip",
    "system_placement": "first-turn",
    "stop_on": "degenerate",
    "best_of": 3,
    "select_judge": "rules",
}
"""A changed value for every experiment field (``chat_template`` and ``frozen_date``
are fingerprinted as the template file's SHA and the run's date: tested below)."""


def test_every_field_is_placed_exactly_once() -> None:
    fields = set(RunConfig.model_fields)
    assert fields == set(FIELD_ROLES), (
        f"place these RunConfig fields in FIELD_ROLES: {sorted(fields ^ set(FIELD_ROLES))}"
    )
    assert set(FIELD_ROLES.values()) == {"experiment", "selection", "cosmetic"}


@pytest.mark.parametrize(
    "name", [f for f in FINGERPRINT if f not in ("chat_template", "frozen_date")]
)
def test_every_experiment_field_changes_the_fingerprint(name: str) -> None:
    """``select_judge`` matters only where a verdict steers the rollout (best-of)."""
    steered = {**ROLLOUT, "best_of": 3} if name == "select_judge" else ROLLOUT
    base = build_config(steered)
    other = build_config({**steered, name: CHANGED[name]})
    assert base.fingerprint("2026-01-01")[0] != other.fingerprint("2026-01-01")[0], name
    assert base.hash() != other.hash(), name


def test_the_template_file_and_the_date_change_the_fingerprint(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jinja", tmp_path / "b.jinja"
    a.write_text("{{ messages }}")
    b.write_text("{{ messages }}!")
    fa = build_config({"chat_template": str(a)}).fingerprint("2026-01-01")[0]
    fb = build_config({"chat_template": str(b)}).fingerprint("2026-01-01")[0]
    assert fa != fb != build_config({}).fingerprint("2026-01-01")[0]
    assert (
        build_config({}).fingerprint("2026-01-02")[0]
        != build_config({}).fingerprint("2026-01-01")[0]
    )


@pytest.mark.parametrize("name", SELECTION)
def test_selection_fields_name_the_run_directory_but_not_the_rows(name: str) -> None:
    values: dict[str, Any] = {
        "models": ["fake:x"],
        "datasets": ["mtbench"],
        "limit": 3,
        "sample": 3,
        "items": ["a"],
        "temperatures": [0.5],
        "samples": 3,
        "perturbations": ["truncate:0.5"],
        "probe": "likelihood",
        "turns": 5,
        "judge_reference": True,
        "skip_bad_rows": True,
    }
    base, other = build_config({}), build_config({name: values[name]})
    assert base.fingerprint("2026-01-01") == other.fingerprint("2026-01-01")
    assert base.hash() != other.hash()


@pytest.mark.parametrize("name", [f for f, r in FIELD_ROLES.items() if r == "cosmetic"])
def test_cosmetic_fields_change_neither(name: str) -> None:
    values: dict[str, Any] = {
        "judges": ["rules"],
        "base_url": "http://127.0.0.1:1/v1",
        "judge_base_url": "http://127.0.0.1:1/v1",
        "keep_configs": True,
        "executor": "ray",
        "address": "auto",
        "workers": 5,
    }
    base, other = build_config({}), build_config({name: values[name]})
    assert base.fingerprint("2026-01-01") == other.fingerprint("2026-01-01")
    assert base.hash() == other.hash()


def test_a_one_turn_run_keeps_its_config_id() -> None:
    """Rollout options do not change a one-turn run's rows, so its id stays (runs made
    before the rollout options entered the fingerprint still resume)."""
    cfg = build_config({})
    _, opts = cfg.fingerprint("2026-01-01")
    assert not {"best_of", "stop_on", "select_judge"} & set(opts)
    assert cfg.fingerprint("2026-01-01") == build_config({"best_of": 3}).fingerprint("2026-01-01")


REPRO = [
    "rollout", "--model", "fake:toy", "--dataset", "gsm8k", "--limit", "3", "--samples", "2",
    "--turns", "2", "--user-temperature", "1.0",
]  # fmt: skip


def test_a_single_judge_best_of_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's repro: the second command (``--best-of 3``, one judge) used to add
    its turns to the first run's cells (n 6 -> 12)."""
    out = tmp_path / "ro"
    assert main([*REPRO, "--out", str(out)]) == 0
    assert "null" in capsys.readouterr().out  # survival beside its null floor
    assert main([*REPRO, "--best-of", "3", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "best-of" in err and "--select-judge" in err
    with Store(out / "store.sqlite") as store:
        assert len(store.configs()) == 1


def test_best_of_into_the_same_directory_is_refused_or_kept_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ro"
    two = ["--judge", "offline", "--judge", "rules"]
    assert main([*REPRO, *two, "--out", str(out)]) == 0
    capsys.readouterr()
    assert main([*REPRO, *two, "--best-of", "3", "--out", str(out)]) == 2
    assert "best_of 1 -> 3" in capsys.readouterr().err
    argv = [*REPRO, *two, "--best-of", "3", "--keep-configs", "--out", str(out)]
    assert main([*argv, "--format", "json"]) == 0
    with Store(out / "store.sqlite") as store:
        assert len(store.configs()) == 2
    data = json.loads((out / "summary.json").read_text())
    cells = [cell_from_json(c) for c in data["cells"] if c["probe"] == "rollout" and c["turn"] == 1]
    assert sorted(c.n for c in cells if c.judge == "rules") == [6, 6]  # never 12
