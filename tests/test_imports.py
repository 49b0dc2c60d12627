"""The package's import graph has no cycle, and only ``rundir.store`` speaks SQL to a run.

Run: ``.venv/bin/python -m pytest tests/test_imports.py -q`` (well under a second). The
graph is read from the source (module-level and function-level ``import`` statements),
not from a live interpreter, so lazy imports count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "userturn"


def _module(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, known: set[str]) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        out |= {n for n in names if n in known}
    return out


def graph() -> nx.DiGraph:
    files = {_module(p): p for p in SRC.rglob("*.py")}
    g = nx.DiGraph()
    for mod, path in files.items():
        g.add_node(mod)
        for dep in _imports(path, set(files)):
            # importing a package's submodule runs the package: not an edge back to us
            if dep != mod and not mod.startswith(dep + "."):
                g.add_edge(mod, dep)
    return g


def test_there_is_no_import_cycle() -> None:
    cycles = list(nx.simple_cycles(graph()))
    assert cycles == [], f"import cycles: {cycles[:5]}"


def test_the_graph_sees_real_edges() -> None:
    """Guard against a walker that finds nothing (an empty graph has no cycle either)."""
    g = graph()
    assert g.has_edge("userturn.run.driver", "userturn.rundir.store")
    assert g.has_edge("userturn.run.worker", "userturn.chat")


@pytest.mark.parametrize("path", sorted(SRC.rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_only_the_store_runs_sql_on_a_run(path: Path) -> None:
    """The run store owns its schema; two other SQLite files have their own small
    stores (the shared judge cache and the annotation database)."""
    own_db = {"rundir/store.py", "judges/cache.py", "annotate/db.py"}
    rel = str(path.relative_to(SRC))
    text = path.read_text(encoding="utf-8")
    if rel not in own_db:
        assert "sqlite3" not in text and ".execute(" not in text, rel


def test_the_cli_starts_without_the_heavy_libraries() -> None:
    """Every command pays the CLI's import time (a finished run is re-run in about 3 s,
    P4): statistics, dataframes, learners and engines are imported where they are used."""
    import subprocess
    import sys

    heavy = ["statsmodels", "scipy", "pandas", "sklearn", "torch", "transformers", "llama_cpp"]
    code = f"import sys, userturn.cli; print(','.join(m for m in {heavy!r} if m in sys.modules))"
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "", f"imported at CLI start: {loaded}"
