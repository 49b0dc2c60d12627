"""Clean ``--help``: ``--model SPEC`` rather than ``--model <list[str]>``, and
``compare RUN_A RUN_B`` rather than ``compare {run_a} {run_b}``.

Typer derives help metavars from Python annotations, which is noise to a user. Rather
than repeat a metavar on every one of ~100 options, :func:`tidy` walks the registered
commands once: an option without a metavar gets one from its flag (``--out`` -> ``PATH``)
or its type (``int`` -> ``N``), and every command and group renders arguments by name.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup
from typer.models import OptionInfo, ParameterInfo

BY_FLAG = {
    "--model": "SPEC",
    "--dataset": "SPEC",
    "--judge": "SPEC",
    "--judges": "J1,J2",
    "--perturb": "SPEC",
    "--out": "PATH",
    "--run": "DIR",
    "--config": "FILE",
    "--in": "FILE",
    "--messages": "FILE",
    "--template": "FILE",
    "--chat-template": "FILE",
    "--key": "FILE",
    "--temperatures": "T1,T2",
    "--items": "ID,...",
    "--format": "FORMAT",
    "--base-url": "URL",
    "--judge-base-url": "URL",
    "--chat-template-kwargs": "JSON",
    "--date": "YYYY-MM-DD",
    "--address": "ADDRESS",
}
BY_TYPE = {int: "N", float: "X", Path: "PATH", str: "TEXT"}


def _base_type(annotation: Any) -> Any:
    """``list[str] | None`` -> ``str``; ``Annotated[int, ...]`` -> ``int``."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated or origin is list or (origin is not None and args):
        return _base_type(args[0]) if args else annotation
    return annotation


def _infos(callback: Callable[..., Any]) -> Iterator[tuple[ParameterInfo, Any]]:
    hints = typing.get_type_hints(callback, include_extras=True)
    for name, param in inspect.signature(callback).parameters.items():
        hint = hints.get(name)
        meta = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, ParameterInfo)]
        info = param.default if isinstance(param.default, ParameterInfo) else None
        for found in [info, *meta]:
            if found is not None:
                yield found, _base_type(hint)


def _metavar(info: ParameterInfo, base: Any) -> str | None:
    if base is bool:
        return None
    decls = [d for d in getattr(info, "param_decls", None) or () if d.startswith("--")]
    for decl in decls:
        if decl in BY_FLAG:
            return BY_FLAG[decl]
    return BY_TYPE.get(base, "TEXT")


def _fill(callback: Callable[..., Any] | None) -> None:
    if callback is None:
        return
    for info, base in _infos(callback):
        if info.metavar is None and isinstance(info, OptionInfo):
            info.metavar = _metavar(info, base)


def tidy(app: typer.Typer) -> None:
    """Give every option a metavar and every command the clean renderer, recursively."""
    for cmd in app.registered_commands:
        _fill(cmd.callback)
        if cmd.cls in (None, TyperCommand):
            cmd.cls = CleanCommand
    if app.registered_callback is not None:
        _fill(app.registered_callback.callback)
    if app.info.cls in (None, TyperGroup):
        app.info.cls = CleanGroup
    for group in app.registered_groups:
        if group.typer_instance is not None:
            tidy(group.typer_instance)
        if group.cls in (None, TyperGroup):
            group.cls = CleanGroup


def _arg_name(param: Any) -> str:
    name = str(param.metavar or param.name).upper()
    return name + ("..." if param.nargs != 1 else "")


def _usage(cmd: Any, ctx: Any) -> list[str]:
    pieces = [cmd.options_metavar] if cmd.options_metavar else []
    for param in cmd.get_params(ctx):
        if param.param_type_name == "argument":
            name = _arg_name(param)
            pieces.append(name if param.required else f"[{name}]")
    return pieces


def _format(cmd: Any, ctx: Any, formatter: Any) -> None:
    args, opts = [], []
    for param in cmd.get_params(ctx):
        if param.param_type_name == "argument":
            args.append((_arg_name(param), param.help or ""))
        elif (rv := param.get_help_record(ctx)) is not None:
            opts.append(rv)
    for title, rows in (("Arguments", args), ("Options", opts)):
        if rows:
            with formatter.section(title):
                formatter.write_dl(rows)


class CleanCommand(TyperCommand):
    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return _usage(self, ctx)

    def format_options(self, ctx: Any, formatter: Any) -> None:
        _format(self, ctx, formatter)


class CleanGroup(TyperGroup):
    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [*_usage(self, ctx), self.subcommand_metavar or "COMMAND [ARGS]..."]

    def format_options(self, ctx: Any, formatter: Any) -> None:
        _format(self, ctx, formatter)
        self.format_commands(ctx, formatter)
