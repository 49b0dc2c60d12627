"""The thin CLI: ``main(argv) -> int`` parses, calls library functions, prints.

Errors are one plain line on stderr (``error: FILE:LINE: field 'x': what``) with exit
code 2, never a multi-line panel, so they read well in logs and scripts. Subcommands live
in one module each and register themselves on the app; tests call ``main`` in-process.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
from collections.abc import Sequence
from typing import Any

import typer

from userturn.errors import UserError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="Probe interaction awareness with user-turn generation.",
)

COMMAND_MODULES = (
    "userturn.cli.run_cmd",
    "userturn.cli.render_cmd",
    "userturn.cli.judge_cmd",
    "userturn.cli.data_cmd",
    "userturn.cli.agree_cmd",
    "userturn.cli.export_cmd",
    "userturn.cli.report_cmd",
    "userturn.cli.annotate_cmd",
    "userturn.cli.train_cmd",
    "userturn.cli.repair_cmd",
)


def _register() -> None:
    for name in COMMAND_MODULES:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name).register(app)


_register()


def _click_modules() -> list[Any]:
    """Typer >= 0.2x vendors click as ``typer._click``; older releases use click itself."""
    mods = []
    for name in ("typer._click.exceptions", "click.exceptions"):
        if importlib.util.find_spec(name.rsplit(".", 1)[0]) is not None:
            mods.append(importlib.import_module(name))
    return mods


_CLICK = _click_modules()


def _classes(name: str) -> tuple[type[BaseException], ...]:
    return tuple(getattr(m, name) for m in _CLICK if hasattr(m, name))


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI in-process and return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        result = app(args=args, prog_name="userturn", standalone_mode=False)
    except UserError as exc:
        return _error(str(exc))
    except _classes("NoArgsIsHelpError") as exc:
        exc.show()  # type: ignore[attr-defined]
        return 0
    except _classes("Exit") as exc:
        return int(exc.exit_code)  # type: ignore[attr-defined]
    except _classes("ClickException") as exc:
        return _error(_usage_line(exc))
    except _classes("Abort"):
        return _error("aborted")
    return int(result) if isinstance(result, int) else 0


def _usage_line(exc: BaseException) -> str:
    """``field 'limit': Input should be a valid integer`` from a click/typer error."""
    param = getattr(exc, "param", None)
    msg = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    msg = msg.splitlines()[0] if msg else type(exc).__name__
    name = getattr(param, "name", None)
    return f"field '{name}': {msg}" if name else msg


def entrypoint() -> None:
    sys.exit(main())
