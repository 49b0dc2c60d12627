"""The package is layered, and no module imports from a layer above its own.

Run: ``.venv/bin/python -m pytest tests/test_layers.py -q`` (well under a second).

The layers, lowest first (a module may import its own layer and any below it):

1. base: the shared vocabulary (types, errors, specs, redaction, statistics, config,
   the registry, downloaded assets);
2. ``rundir``: what a run directory holds (keys, records, the records.jsonl codec, the
   store, the lock, atomic writes), so plugins and analysis can read a run without the
   stages that write one;
3. plugin support: chat templates, the HTTP client, the HF model loader and the scorers,
   which plugins build on;
4. plugins that use them: datasets (score with ``scoring``, never the other way),
   perturbations and backends;
5. judges (LLM judges run on backends and the HTTP client);
6. ``analysis``: cells, intervals, tables, comparisons (reads the store and judges);
7. ``run``: the stages and the driver (writes outputs from analysis's cells);
8. readers of finished runs: report, annotate, train, interop;
9. entry points: the CLI, ``python -m userturn`` and the package's lazy ``load_run``.

Imports are read from the source with ``ast`` at every depth (module level, inside
functions, under ``TYPE_CHECKING``), so a lazy import counts like any other. The registry
resolves a plugin's ``module:attr`` target by name at run time; that string is its
contract, not an import, and is not an edge here. Any layer may import the package root
itself (``import userturn`` for ``__version__``): Python runs it before any submodule
anyway, and its one import of its own (``load_run``, from analysis) is lazy.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "userturn"

LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    (
        "base",
        frozenset({"types", "errors", "spec", "redact", "stats", "config", "registry", "assets"}),
    ),
    ("rundir", frozenset({"rundir"})),
    (
        "plugin support",
        frozenset({"chat", "http", "hfmodel", "scoring"}),
    ),
    ("plugins", frozenset({"datasets", "perturb", "backends"})),
    ("judges", frozenset({"judges"})),
    ("analysis", frozenset({"analysis"})),
    ("run", frozenset({"run"})),
    ("readers", frozenset({"report", "annotate", "train", "interop"})),
    ("entry", frozenset({"cli", "__main__", "__init__"})),
)


def _rank(top: str) -> int:
    for rank, (_, names) in enumerate(LAYERS):
        if top in names:
            return rank
    raise KeyError(top)


def _module(path: Path, root: Path) -> tuple[str, ...]:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return parts[:-1] if parts[-1] == "__init__" else parts


def _top(module: tuple[str, ...]) -> str:
    """The part of ``userturn`` a module belongs to (``__init__`` for the package itself)."""
    return module[1] if len(module) > 1 else "__init__"


def _targets(
    node: ast.Import | ast.ImportFrom, here: tuple[str, ...], pkg: bool, root: Path
) -> list[str]:
    """The userturn modules an import statement loads (relative imports resolved)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        package = list(here if pkg else here[:-1])
        base = package[: len(package) - (node.level - 1)]
        module = ".".join([*base, *([node.module] if node.module else [])])
    else:
        module = node.module or ""
    if module == "userturn":
        # ``from userturn import assets``: a name that is a submodule is that module;
        # another (``__version__``) is the package itself
        subs = {a.name for a in node.names}
        return [
            f"userturn.{n}" if (root / f"{n}.py").exists() or (root / n).is_dir() else module
            for n in sorted(subs)
        ]
    return [module]


def upward_imports(root: Path) -> list[str]:
    """``FILE:LINE: ...`` for every import of a module from a higher layer, in file order."""
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        here = _module(path, root)
        mine = _top(here)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in _targets(node, here, path.name == "__init__.py", root):
                parts = tuple(target.split("."))
                if parts[0] != "userturn" or len(parts) < 2 or parts[1] == mine:
                    continue
                theirs = parts[1]
                if _rank(theirs) > _rank(mine):
                    found.append(
                        f"{path.relative_to(root.parent)}:{node.lineno}: {mine} "
                        f"({LAYERS[_rank(mine)][0]}) imports {target} "
                        f"({LAYERS[_rank(theirs)][0]})"
                    )
    return found


def test_no_module_imports_from_a_higher_layer() -> None:
    found = upward_imports(SRC)
    assert found == [], "upward imports:\n" + "\n".join(found)


def test_every_part_of_the_package_has_a_layer() -> None:
    """A new package or top-level module must be placed before it can be imported."""
    tops = {_top(_module(p, SRC)) for p in SRC.rglob("*.py")}
    placed = set().union(*(names for _, names in LAYERS))
    assert tops - placed == set()
    assert placed - tops == set(), "a layer names a part that no longer exists"


def test_the_walker_sees_the_real_edges() -> None:
    """Guard against a walker that finds nothing: imports it must see, one per kind
    (function-level, ``from userturn import``, across several layers)."""
    seen: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        here = _module(path, SRC)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in _targets(node, here, path.name == "__init__.py", SRC):
                    seen.setdefault(".".join(here), set()).add(target)
    assert "userturn.rundir.keys" in seen["userturn.judges.llm"]
    assert "userturn.rundir.store" in seen["userturn.analysis.cells"]
    assert "userturn.analysis.cells" in seen["userturn.run.outputs"]
    assert "userturn.analysis.loading" in seen["userturn"]  # inside __getattr__
    assert "userturn.assets" in seen["userturn.scoring.nltk_data"]


def test_an_upward_import_is_named_by_file_and_line(tmp_path: Path) -> None:
    """The checker on a planted tree: a lazy import, a relative import and a
    ``from userturn import`` that each climb a layer are reported; downward ones are not."""
    root = tmp_path / "userturn"
    (root / "rundir").mkdir(parents=True)
    (root / "analysis").mkdir()
    (root / "cli").mkdir()
    (root / "__init__.py").write_text("")
    (root / "cli" / "__init__.py").write_text("")
    (root / "rundir" / "__init__.py").write_text("")
    (root / "analysis" / "__init__.py").write_text("")
    (root / "rundir" / "keys.py").write_text(
        "from userturn.errors import UserError\n"
        "\n"
        "def f():\n"
        "    from userturn.run.driver import run\n"
        "    return run\n"
    )
    (root / "rundir" / "store.py").write_text("from ..analysis import cells\n")
    (root / "analysis" / "cells.py").write_text(
        "from userturn import cli\nfrom userturn.rundir.store import Store\n"
    )
    assert upward_imports(root) == [
        "userturn/analysis/cells.py:1: analysis (analysis) imports userturn.cli (entry)",
        "userturn/rundir/keys.py:4: rundir (rundir) imports userturn.run.driver (run)",
        "userturn/rundir/store.py:1: rundir (rundir) imports userturn.analysis (analysis)",
    ]
