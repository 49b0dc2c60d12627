"""What surprised a new user, each fixed and pinned here: files in the current
directory, specs split by the shell, dry runs that passed missing files and named
nothing, runs that started an hour of work without a word, unwarned truncation, a
listing without the openai judge, a misleading export error, planted repeats in a
short annotation packet, and ``judge card --ref builtin`` with a real LLM judge served
by llama.cpp on 127.0.0.1.

Run: ``.venv/bin/python -m pytest tests/test_cli_surprises.py -q``
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from userturn.cli import main, plan, speed
from userturn.cli.judge_cmd import builtin_references
from userturn.config import build_config
from userturn.judges.protocol import HUMAN_FILES, REFERENCE_FILES
from userturn.judges.rules import Thresholds

FAKE = ["run", "--model", "fake:x", "--judge", "rules"]


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    return err


def test_judge_card_prints_and_writes_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It wrote ./judge_cards/offline.json even when asked only to print."""
    assert main(["judge", "card", "--judge", "offline"]) == 0
    got = capsys.readouterr()
    assert got.out.startswith("judge card offline@") and "wrote" not in got.err
    assert list(tmp_path.iterdir()) == [tmp_path / "speed.json"] or not list(tmp_path.iterdir())
    out = tmp_path / "cards"
    assert main(["judge", "card", "--judge", "offline", "--out", str(out)]) == 0
    assert [p.name for p in out.iterdir()] == ["offline.json"]
    assert f"wrote {out / 'offline.json'}" in capsys.readouterr().err


def test_a_spec_the_shell_split_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """Unquoted, `--model smollm2-135m?n_ctx=2048&n_threads=1` reaches userturn cut at
    the `&`; the pieces that show it (an empty option) get a clear error."""
    for spec in ("smollm2-135m?", "smollm2-135m?n_ctx=2048&", "smollm2-135m?&n_threads=1"):
        err = one_line_error(capsys, ["run", "--model", spec, "--dry-run"])
        assert "did the shell split it? Quote every spec" in err
    assert main(["run", "--model", "smollm2-135m?n_ctx=2048", "--limit", "1", "--dry-run"]) == 0


def test_a_background_run_with_options_warns_of_a_split() -> None:
    cfg = build_config({"models": ["smollm2-135m?n_ctx=2048"]})
    warning = plan.split_warning(cfg, background=True)
    assert warning is not None and "kill %1" in warning and "quote the spec" in warning
    assert plan.split_warning(cfg, background=False) is None
    assert plan.split_warning(build_config({}), background=True) is None


def test_docs_say_to_quote_specs() -> None:
    from shared_files import REPO

    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    assert "Quote every spec" in text and "'smollm2-135m?n_ctx=2048&n_threads=1'" in text


def test_dry_run_checks_files_and_names_what_it_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such.gguf"
    err = one_line_error(capsys, ["run", "--model", f"llamacpp:{missing}", "--dry-run"])
    assert "GGUF file not found" in err and str(missing) in err
    err = one_line_error(capsys, [*FAKE, "--chat-template", str(tmp_path / "t.jinja"), "--dry-run"])
    assert "t.jinja" in err
    err = one_line_error(capsys, [*FAKE, "--dataset", f"jsonl:{tmp_path / 'x.jsonl'}", "--dry-run"])
    assert "x.jsonl" in err
    argv = [*FAKE, "--dataset", "gsm8k", "--dataset", "mtbench", "--limit", "2", "--dry-run"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "models: fake:x" in out
    assert "datasets: gsm8k (2 of 100 items), mtbench (2 of 80 items)" in out


def test_time_estimates_come_from_a_measured_speed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No speed stored: the dry run says so. After a run of the same spec, its measured
    tokens/s (stored in USERTURN_SPEED_FILE) gives the estimate."""
    dry = [*FAKE, "--limit", "4", "--dry-run"]
    assert main(dry) == 0
    assert "time: unknown: no measured speed for fake:x yet" in capsys.readouterr().out
    assert main([*FAKE, "--limit", "3", "--out", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    measured = speed.lookup("fake:x")
    assert measured is not None and measured.calls == 3 + 6 and measured.tokens > 0
    stored = json.loads((tmp_path / "speed.json").read_text())
    assert stored["fake:x"]["calls"] == 9
    assert main(dry) == 0
    out = capsys.readouterr().out
    assert "time: about " in out and f"measured over 9 calls on {measured.date}" in out
    assert f"{measured.tokens_per_s:.3g} tok/s" in out


def test_a_bare_run_states_its_size_and_duration_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The size line is the run's first progress line; a run that then fails on bad
    input adds exactly one error line."""
    assert main([*FAKE, "--limit", "2", "--out", str(tmp_path / "r")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("progress 0s: run: 1 model(s) x 1 dataset(s) (2 items) x T=0,1")
    assert "2 answers + 4 user turns to generate; time: " in err[0]
    assert main([*FAKE, "--limit", "2", "--out", str(tmp_path / "r")]) == 0
    first = capsys.readouterr().err.splitlines()[0]
    assert "0 answers + 0 user turns to generate (the rest is stored)" in first
    (tmp_path / "afile").write_text("x")
    assert main([*FAKE, "--limit", "2", "--out", str(tmp_path / "afile")]) == 2
    said = [x for x in capsys.readouterr().err.splitlines() if not x.startswith("progress ")]
    assert len(said) == 1 and said[0].startswith("error: ")


def test_the_table_warns_on_truncated_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fake model's answers are 4 words: a 2-token budget cuts every one."""
    argv = [*FAKE, "--limit", "3", "--temperatures", "0", "--max-answer-tokens", "2"]
    assert main([*argv, "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "warning: 3 of 3 answers stopped at the answer token limit" in out
    assert "0.0% (3, 3 cut)" in out
    assert main([*FAKE, "--limit", "3", "--temperatures", "0", "--out", str(tmp_path / "q")]) == 0
    assert "warning" not in capsys.readouterr().out


def test_list_shows_every_judge_and_its_options(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["list", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    judges = {r["name"]: r for r in rows if r["kind"] == "judge"}
    assert {"offline", "rules", "llm", "openai", "cascade"} <= set(judges)
    for name in ("llm", "openai", "cascade"):
        options = judges[name]["options (?key=value)"]
        assert all(o in options for o in ("cache", "max_tokens", "parse_retries", "thinking"))
    assert judges["offline"]["options (?key=value)"] == "threshold"
    rules = judges["rules"]["options (?key=value)"].split(", ")
    assert rules == sorted(f.name for f in dataclasses.fields(Thresholds))


def test_a_bad_offline_option_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*FAKE, "--limit", "2", "--temperatures", "0", "--out", str(tmp_path / "r")]
    err = one_line_error(capsys, [*argv, "--judge", "offline?threshold=1.5"])
    assert "threshold='1.5'" in err and "<= 1" in err
    err = one_line_error(capsys, [*argv, "--judge", "rules?max_wrds=9"])
    assert "'max_wrds'" in err and "max_words" in err
    assert not (tmp_path / "r").exists()


def test_export_pairs_on_a_likelihood_run_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "lik"
    argv = ["likelihood", "--model", "fake:x", "--dataset", "healthbench", "--limit", "2"]
    assert main([*argv, "--out", str(run)]) == 0
    capsys.readouterr()
    err = one_line_error(
        capsys, ["export", "pairs", "--run", str(run), "--out", str(tmp_path / "p.jsonl")]
    )
    assert "likelihood-probe run" in err and "--judge" not in err


def test_a_short_annotation_packet_plants_no_repeats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "r"
    argv = [*FAKE, "--limit", "4", "--temperatures", "1", "--samples", "2", "--out", str(run)]
    assert main(argv) == 0
    capsys.readouterr()
    packet = tmp_path / "packet"
    assert main(["annotate", "export", "--run", str(run), "--out", str(packet), "--n", "6"]) == 0
    said = capsys.readouterr().out
    assert "wrote 6 examples" in said and "and 0 planted duplicates" in said
    argv = ["annotate", "export", "--run", str(run), "--out", str(tmp_path / "p2"), "--n", "3"]
    assert "--duplicates" in one_line_error(capsys, [*argv, "--duplicates", "4"])


def test_reference_sets_ship_in_the_package(shared_dir: Path) -> None:
    """The packaged files are the shared reference files, byte for byte, plus the
    project's own real-human files, which have no other copy."""
    paths = builtin_references()
    assert [p.name for p in paths] == list(REFERENCE_FILES)
    sizes = {"judge_human.jsonl": 207, "judge_human_heldout.jsonl": 600}
    for path in paths:
        if path.name in HUMAN_FILES:
            assert not (shared_dir / path.name).exists()
            assert len(path.read_text().splitlines()) == sizes[path.name]
        else:
            assert path.read_bytes() == (shared_dir / path.name).read_bytes()


def test_judge_card_ref_builtin_with_a_real_llm_judge(
    llama_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Any LLM judge gets a card out of the box: SmolLM2 served by llama.cpp judges the
    first row of each shipped reference set (5 turns, messages cut to 300 characters to
    keep the server's work small)."""
    judge = f"llm:openai:smollm2?base_url={llama_server}&cache=off&max_tokens=40&max_chars=300"
    out = tmp_path / "cards"
    argv = ["judge", "card", "--judge", judge, "--ref", "builtin?limit=1", "--out", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert text.startswith("judge card llm:openai:smollm2")
    card = json.loads(next(out.iterdir()).read_text())
    assert [r["file"] for r in card["references"]] == list(REFERENCE_FILES)
    assert [r["n"] for r in card["references"]] == [1, 1, 1, 1, 1]
    counted = sum(card["sigma"].values()) + card["excluded"]
    assert counted == 5
    bad = one_line_error(capsys, ["judge", "card", "--judge", judge, "--ref", "builtin?limt=1"])
    assert "unknown option 'limt'" in bad
