"""The README and docs/ stay true: every `userturn` command written in a code block runs
(with ``--dry-run`` or ``--help``, so nothing is generated), every relative link points to
a file that exists, and every ``#anchor`` to a heading that exists.

Run: ``.venv/bin/python -m pytest tests/test_docs.py -q``
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from shared_files import REPO
from userturn.cli import main

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.M | re.S)
LINK = re.compile(r"\]\(([^)\s]+)\)")
# Commands that launch work get --dry-run; everything else is checked through --help.
DRY_RUN = {"run", "likelihood", "rollout"}
# What a dry run may lack here: an extra (vLLM, GPU torch), a server, or a user's own file.
MACHINE_LACKS = r"pip install|userturn\[|connect|not found|no such file|does not exist"


def written_commands(path: Path) -> list[str]:
    """`userturn ...` lines of a file's shell code blocks, comments and line breaks folded."""
    commands = []
    for block in FENCE.findall(path.read_text(encoding="utf-8")):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith("userturn "):
                commands.append(line)
    return commands


def argv_to_check(command: str) -> list[str]:
    """The command's arguments, with repository files (``examples/...``) made absolute
    because the command runs in an empty directory."""
    argv = [str(REPO / a) if (REPO / a).is_file() else a for a in shlex.split(command)[1:]]
    if argv[0] in DRY_RUN:
        return argv if "--dry-run" in argv else [*argv, "--dry-run"]
    return [*argv, "--help"]


CASES = [(path.name, cmd) for path in DOCS for cmd in written_commands(path)]


def test_the_readme_writes_commands_to_check() -> None:
    assert sum(1 for name, _ in CASES if name == "README.md") >= 3


@pytest.mark.parametrize(("doc", "command"), CASES, ids=[f"{d}:{c[:60]}" for d, c in CASES])
def test_every_written_command_runs(
    doc: str,
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A command in a doc either dry-runs or prints its help: its flags and specs exist.

    A dry run may stop only on what this machine cannot have (an extra such as vLLM, or
    a user's own file or server the doc names as an example), and says so in one line.
    """
    monkeypatch.chdir(tmp_path)  # a dry run may name a default run directory; none is written
    argv = argv_to_check(command)
    try:
        code = main(argv)
    except SystemExit as exc:  # --help exits through click
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    if code == 2 and argv[-1] == "--dry-run" and re.search(MACHINE_LACKS, err):
        pytest.skip(f"{doc}: needs what this machine lacks: {err.strip()}")
    assert code == 0, f"{doc}: `{command}` exited {code}: {err.strip()}"
    assert not any(tmp_path.iterdir()), f"{doc}: `{command}` wrote files"


def headings(path: Path) -> set[str]:
    """GitHub's anchors for a file's headings: lower case, punctuation dropped, spaces to -."""
    anchors = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            text = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return anchors


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_every_relative_link_resolves(path: Path) -> None:
    for target in LINK.findall(path.read_text(encoding="utf-8")):
        if "://" in target or target.startswith("mailto:"):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        assert dest.exists(), f"{path.name}: link to {target} points nowhere"
        if anchor and dest.suffix == ".md":
            assert anchor in headings(dest), f"{path.name}: no heading for #{anchor} in {dest.name}"


def test_the_readmes_dataset_example_runs() -> None:
    """The README's copy-me dataset (an abridged ``mtbench.py``) is code a reader can
    paste: it runs as written and reads the shipped MT-Bench file like the real one."""
    from userturn import assets
    from userturn.datasets import load_dataset
    from userturn.datasets.sources import MTBENCH
    from userturn.spec import parse_spec

    blocks = FENCE.findall((REPO / "README.md").read_text(encoding="utf-8"))
    source = next(b for b in blocks if "class MTBench(RowDataset)" in b)
    space: dict[str, object] = {}
    exec(compile(source, "README.md", "exec"), space)
    spec = f"mtbench:{assets.fetch(MTBENCH)}"
    example = space["MTBench"](parse_spec(spec)).load()  # type: ignore[operator]
    real = load_dataset(spec).load()
    assert len(real) == 80
    assert [(i.id, i.reference_turn) for i in example] == [(i.id, i.reference_turn) for i in real]
