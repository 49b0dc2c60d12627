"""Help people can scan: options in panels with their defaults, an example per command,
every option described, per-probe usage lines, whole summaries, ``--version``.

Run: ``.venv/bin/python -m pytest tests/test_cli_help.py -q``
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import typer

from userturn import __version__
from userturn.cli import app, main

PANELS = ("Model & data:", "Sampling:", "Judging:", "Output:", "Execution:")


def commands() -> Iterator[tuple[list[str], Any]]:
    """Every command and group, as the argv that reaches it and its click object."""

    def walk(cmd: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
        yield path, cmd
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            yield from walk(sub, [*path, name])

    yield from walk(typer.main.get_command(app), [])


def help_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main([*argv, "--help"]) == 0
    return capsys.readouterr().out


def test_run_help_has_panels_defaults_and_examples(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    text = help_of(["run"], capsys)
    positions = [text.index(p) for p in PANELS]
    assert positions == sorted(positions), "panels in order"
    assert max(len(line) for line in text.splitlines()) <= 80
    for flag, default in (
        ("--temperatures", "[default: 0,1]"),
        ("--max-answer-tokens", "[default: 512]"),
        ("--judge SPEC", "[default: offline]"),
        ("--seed N", "[default: 0]"),
        ("--top-p", "[default: 1]"),
    ):
        block = text[text.index(flag) :].split("\n  --")[0]
        assert default in " ".join(block.split()), (flag, block)
    assert "Examples:\n    userturn run --limit 5 --dry-run" in text
    assert text.index("--seed N") > text.index("Sampling:")  # in its panel


def test_every_command_has_an_example_and_every_option_a_description() -> None:
    for path, cmd in commands():
        assert cmd.epilog and "Examples:" in cmd.epilog, path
        for param in cmd.params:
            if param.param_type_name == "option":
                assert param.help, (path, param.opts)


@pytest.mark.parametrize("probe", ["likelihood", "rollout"])
def test_probe_commands_have_their_own_usage_and_options(
    probe: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = help_of([probe], capsys)
    assert text.startswith(f"Usage: userturn {probe} [OPTIONS]")
    assert "Usage: userturn run" not in text
    assert "--model SPEC" in text and "--limit N" in text and "--probe TEXT" not in text
    assert ("--user-temperature X" in text) == (probe == "rollout")


def test_user_temperature_reaches_the_rollout(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["rollout", "--model", "fake:x", "--limit", "1", "--turns", "1", "--dry-run"]
    assert main([*base, "--user-temperature", "0.7"]) == 0
    assert "at T=0.7" in capsys.readouterr().out
    assert main([*base, "--user-temperature", "0.7", "--temperatures", "1"]) == 2


def test_top_level_summaries_are_whole_and_version_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = help_of([], capsys)
    commands_part = text.split("Commands:")[1].split("Examples:")[0]
    assert "…" not in commands_part and "..." not in commands_part
    assert "results table." in " ".join(commands_part.split())  # run's whole first sentence
    assert "Quote every spec" in text
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"userturn {__version__}\n"
