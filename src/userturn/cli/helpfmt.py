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
from typer.models import DefaultPlaceholder, OptionInfo, ParameterInfo

from userturn.cli.helptext import EXAMPLES, FLAG_HELP

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
        if not isinstance(info, OptionInfo):
            continue
        if info.metavar is None:
            info.metavar = _metavar(info, base)
        if not info.help:
            decls = [*(info.param_decls or ())]
            if isinstance(info.default, str):  # Annotated[..., Option("--flag")]
                decls.insert(0, info.default)
            flags = [d.split("/")[0] for d in decls if d.startswith("--")]
            info.help = next((FLAG_HELP[f] for f in flags if f in FLAG_HELP), None)


def _name_of(cmd: Any) -> str:
    callback = cmd.callback
    name = cmd.name or (callback.__name__ if callback else "")
    return str(name).replace("_", "-")


def tidy(app: typer.Typer, path: str = "") -> None:
    """Give every option a metavar and help, every command its example and the clean
    renderer, recursively."""
    for cmd in app.registered_commands:
        _fill(cmd.callback)
        cmd.epilog = cmd.epilog or _examples(f"{path} {_name_of(cmd)}".strip())
        if _unset(cmd.cls, TyperCommand):
            cmd.cls = CleanCommand
    if app.registered_callback is not None:
        _fill(app.registered_callback.callback)
        app.registered_callback.epilog = app.registered_callback.epilog or _examples(path)
    if _unset(app.info.cls, TyperGroup):
        app.info.cls = CleanGroup
    for group in app.registered_groups:
        name = f"{path} {group.name}".strip()
        if group.typer_instance is not None:
            tidy(group.typer_instance, name)
            group.typer_instance.info.epilog = group.typer_instance.info.epilog or _examples(name)
        if _unset(group.cls, TyperGroup):
            group.cls = CleanGroup


def _unset(cls: Any, base: type) -> bool:
    """No class chosen yet: None, Typer's own, or Typer's placeholder for "default"."""
    return cls is None or cls is base or isinstance(cls, DefaultPlaceholder)


def _examples(path: str) -> str | None:
    lines = EXAMPLES.get(path)
    return examples(*lines) if lines else None


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
    """Arguments, then options in their panels (``rich_help_panel``) in the order the
    panels first appear, then the options of no panel: forty flags read as five short
    lists. Plain text, so a help page pasted into an issue or a log keeps its shape."""
    args: list[tuple[str, str]] = []
    panels: dict[str, list[tuple[str, str]]] = {}
    for param in cmd.get_params(ctx):
        if param.param_type_name == "argument":
            args.append((_arg_name(param), param.help or ""))
        elif (rv := param.get_help_record(ctx)) is not None:
            panels.setdefault(getattr(param, "rich_help_panel", None) or "", []).append(rv)
    sections = [("Arguments", args)]
    sections += [(name, rows) for name, rows in panels.items() if name]
    sections += [("Options" if len(panels) == 1 else "Other options", panels.get("", []))]
    for title, rows in sections:
        if rows:
            with formatter.section(title):
                formatter.write_dl(rows)


def summary(cmd: Any) -> str:
    """A command's first sentence, whole: click cuts it to fit one line with "…"."""
    text = cmd.short_help or " ".join((cmd.help or "").split("\n\n")[0].split())
    first = text.split(". ")[0].rstrip(".")
    return first + "." if first else ""


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

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, summary(cmd)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def examples(*lines: str) -> str:
    """An ``Examples:`` epilog kept line by line (click rewraps other paragraphs)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)
