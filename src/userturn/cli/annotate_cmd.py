"""``userturn annotate export|serve|import``: blinded human annotation of a run.

Library imports happen inside the commands, so registering this group costs nothing
for other commands and the web stack is only needed by ``serve``.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal, cast

import typer

from userturn.errors import UserError

annotate_app = typer.Typer(
    help="Blinded human annotation: packets, a web UI, labels.", no_args_is_help=True
)


PER_DUPLICATE = 20
MAX_DUPLICATES = 5


def default_duplicates(n: int) -> int:
    """Repeats worth planting in a packet of ``n``: a handful in a long packet, none in a
    short one (a packet of 6 with 5 repeats is mostly repeats)."""
    return min(MAX_DUPLICATES, n // PER_DUPLICATE)


@annotate_app.command("export")
def export(
    run_dir: Path = typer.Option(..., "--run", help="Run directory to sample from."),
    out: Path = typer.Option(..., "--out", help="Packet folder to create (new or empty)."),
    n: int = typer.Option(100, "--n", min=1, help="Distinct examples in the packet."),
    sampling: str = typer.Option(
        "auto",
        "--sampling",
        help="disagreement (judge splits + agreed cases; needs two judges), prevalence "
        "(uniform, the run's natural rate) or auto (disagreement when the run has two "
        "judges, else prevalence).",
    ),
    judges: str = typer.Option(
        None,
        "--judges",
        help="J1,J2: judges whose σ disagreements are sampled (default: all judges in the run).",
    ),
    share: float = typer.Option(
        None,
        "--disagreement-share",
        min=0.0,
        max=1.0,
        help="Share of disagreements (disagreement sampling; default 0.5).",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed for sampling and order."),
    duplicates: int = typer.Option(
        None,
        "--duplicates",
        min=0,
        help="Planted repeats, for within-annotator consistency, on top of --n. "
        f"[default: one per {PER_DUPLICATE} examples, at most {MAX_DUPLICATES}]",
    ),
    key: Path = typer.Option(
        None, "--key", help="Key file (default: PACKET.key.json beside the packet)."
    ),
) -> int:
    """Sample a run into a packet holding only contexts and user turns."""
    from userturn.annotate import ExportOptions, export_packet
    from userturn.annotate.sampling import Sampling

    if sampling not in ("auto", "disagreement", "prevalence"):
        raise UserError(
            f"unknown sampling {sampling!r} (auto, disagreement, prevalence)", field="--sampling"
        )
    if share is not None and sampling == "prevalence":
        raise UserError(
            "--disagreement-share only applies to --sampling disagreement",
            field="--disagreement-share",
        )
    if duplicates is not None and duplicates > n:
        raise UserError(
            f"{duplicates} planted repeats of {n} examples: at most --n", field="--duplicates"
        )
    duplicates = default_duplicates(n) if duplicates is None else duplicates
    names = tuple(j.strip() for j in (judges or "").split(",") if j.strip())
    opts = ExportOptions(
        n=n,
        sampling=cast(Sampling | Literal["auto"], sampling),
        judges=names,
        seed=seed,
        share=0.5 if share is None else share,
        duplicates=duplicates,
    )
    res = export_packet(run_dir, out, opts, key)
    if res.note:
        typer.echo(f"note: {res.note}")
    strata = ", ".join(f"{k} {v}" for k, v in sorted(res.strata.items()))
    typer.echo(
        f"wrote {res.examples - res.duplicates} examples ({strata}) and "
        f"{res.duplicates} planted duplicates to {res.packet}"
    )
    typer.echo(f"key (keep it away from annotators): {res.key}")
    return 0


@annotate_app.command("serve")
def serve(
    packet: Path = typer.Argument(..., help="Packet folder."),
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to bind."),
    port: int = typer.Option(8765, "--port", min=1, max=65535),
) -> int:
    """Serve the labelling page; submissions are saved in PACKET/annotations.sqlite."""
    from userturn.annotate.app import serve as run_server
    from userturn.annotate.packet import load_packet

    total = len(load_packet(packet).examples)
    if not _loopback(host):
        typer.echo(f"warning: binding {host} exposes the packet beyond this machine", err=True)
    typer.echo(
        f"annotating {total} examples: open http://{host}:{port}/ (Ctrl-C stops; "
        "nothing submitted is lost)"
    )
    run_server(packet, host=host, port=port)
    return 0


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@annotate_app.command("import")
def import_(
    packet: Path = typer.Argument(..., help="Packet folder."),
    key: Path = typer.Option(None, "--key", help="Key file (default: PACKET.key.json)."),
    out: Path = typer.Option(..., "--out", help="Folder for the label files."),
) -> int:
    """Write one `userturn agree` label file per annotator, with consistency figures."""
    from userturn.annotate import import_annotations
    from userturn.annotate.packet import default_key_path

    res = import_annotations(packet, key or default_key_path(packet), out)
    for a in res.annotators:
        typer.echo(
            f"{a.annotator}: {a.labelled} labelled, {a.unlabelled} not -> "
            f"{out / a.file}; duplicate pairs {a.duplicate_pairs}, consistency "
            f"σ {_fmt(a.sigma_consistency)} label {_fmt(a.label_consistency)}"
        )
    for p in res.pairs:
        typer.echo(
            f"inter-annotator {p.a} vs {p.b}: n {p.n}, agreement "
            f"{_fmt(p.agreement)}, κ {_fmt(p.kappa, pct=False)}, label agreement "
            f"{_fmt(p.label_agreement)}, label κ {_fmt(p.label_kappa, pct=False)}"
        )
    if res.pairs:
        typer.echo(f"wrote {out / 'inter_annotator.json'}")
    return 0


def _fmt(x: float | None, pct: bool = True) -> str:
    if x is None:
        return "n/a"
    return f"{100 * x:.1f}%" if pct else f"{x:.3f}"


def register(app: typer.Typer) -> None:
    app.add_typer(annotate_app, name="annotate")
