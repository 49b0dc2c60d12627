"""Nothing outside the probes package branches on a probe's name.

Run: ``.venv/bin/python -m pytest tests/test_probe_dispatch.py -q`` (well under a second).

The driver asks the probe object (``userturn.run.probes``) what to do, analysis and its
readers tell cells apart by type (``GenerateCell``, ``RolloutCell``, ``LikelihoodCell``)
and records.jsonl lines by the record they decode to. A comparison of a probe field or
a probe name is a branch that a new probe would have to find and extend, so any one in
``src/userturn`` outside ``run/probes/`` fails here, with its file and line.
"""

from __future__ import annotations

import re
from pathlib import Path

from userturn.analysis.cell import FIELDS, GenerateCell, LikelihoodCell, RolloutCell

SRC = Path(__file__).resolve().parents[1] / "src" / "userturn"
PROBES = SRC / "run" / "probes"
NAMES = "generate|likelihood|rollout"
BRANCH = re.compile(
    rf"probe\W{{0,3}}\s*(==|!=)|(==|!=)\s*[\"']({NAMES})[\"']|[\"']({NAMES})[\"']\s*(==|!=)"
)


def branches(root: Path) -> list[str]:
    hits = []
    for path in sorted(root.rglob("*.py")):
        if PROBES in path.parents:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if BRANCH.search(line):
                hits.append(f"{path.relative_to(root.parent)}:{n}: {line.strip()}")
    return hits


def test_no_probe_name_comparison_outside_the_probes_package() -> None:
    assert branches(SRC) == []


def test_the_check_sees_a_comparison(tmp_path: Path) -> None:
    """The pattern catches the spellings the code had (a field, a dict key, a name)."""
    pkg = tmp_path / "userturn"
    pkg.mkdir()
    (pkg / "a.py").write_text(
        'if c.probe == "rollout": pass\n'
        'if rec["probe"] != "likelihood": pass\n'
        'if kind == "generate": pass\n'
        "if isinstance(c, RolloutCell): pass\n"
    )
    assert [h.split(":")[1] for h in branches(pkg)] == ["1", "2", "3"]


def test_each_probe_has_its_own_cell_and_one_summary_shape() -> None:
    """A cell holds its probe's fields only; summary.json writes every field for every
    cell (a field the cell lacks as its empty value), in one order."""
    gen = GenerateCell("m", "d", 0.0, "none", "offline", "c", n=2, rate=0.5)
    roll = RolloutCell("m", "d", 1.0, "none", "offline", "c", turn=2, survival=0.25)
    like = LikelihoodCell("m", "d", None, "none", None, "c", n=3, pmi_share=0.5)
    assert not hasattr(gen, "survival") and not hasattr(gen, "pmi_share")
    assert not hasattr(like, "rate") and not hasattr(like, "labels")
    for cell in (gen, roll, like):
        data = cell.to_json()
        assert list(data) == list(FIELDS) and data["probe"] == cell.probe
    assert like.to_json()["rate"] is None and like.to_json()["labels"] == {}
    assert gen.to_json()["survival"] is None and roll.to_json()["survival"] == 0.25
