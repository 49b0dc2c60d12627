"""The thin CLI: ``main(argv) -> int`` parses, calls library functions, prints.

Errors are one plain line on stderr (``error: FILE:LINE: field 'x': what``) with exit
code 2, never a multi-line panel, so they read well in logs and scripts. Subcommands live
in one module each and register themselves on the app; tests call ``main`` in-process.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import typer

from userturn import __version__
from userturn.cli.helpfmt import CleanGroup, tidy
from userturn.cli.io import Interrupted
from userturn.errors import ResourceError, UserError
from userturn.redact import redact

app = typer.Typer(
    cls=CleanGroup,
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
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
    "userturn.cli.conversations_cmd",
)


def _version(value: bool) -> None:
    if value:
        print(f"userturn {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_version, help="Print the version and exit."
    ),
) -> None:
    """Probe interaction awareness with user-turn generation: a chat model answers, the
    same weights write the next user turn, and a judge says whether it follows up.

    Quote every spec: `--model 'smollm2-135m?n_ctx=2048&n_threads=1'` (unquoted, the
    shell splits at & and globs ?). `userturn COMMAND --help` shows a command's options.
    """


def _register() -> None:
    for name in COMMAND_MODULES:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name).register(app)


_register()
tidy(app)


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
    print(f"error: {redact(message)}", file=sys.stderr)
    return 2


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is now (tests swap it), once per message:
    a dead server's warning repeated for every request says nothing new."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[str, int, str]] = set()

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, record.getMessage())
        if key in self.seen:
            return False
        self.seen.add(key)
        return super().filter(record)


def _logging() -> None:
    """One deduplicating stderr handler on the root logger, fresh for each ``main``."""
    root = logging.getLogger()
    for h in [h for h in root.handlers if isinstance(h, _Stderr)]:
        root.removeHandler(h)
    handler = _Stderr()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.WARNING)
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.WARNING:
        root.setLevel(logging.WARNING)


@dataclass
class _Stop:
    """The signal that stopped the command (0: none), and whether that was said already."""

    signum: int = 0
    said: bool = False


@contextmanager
def _sigint() -> Iterator[_Stop]:
    """Notice Ctrl-C and SIGTERM (what ``kill``, ``timeout`` and batch schedulers send):
    both stop a run the same way, keeping what is stored and saying how to resume.
    Typer turns the KeyboardInterrupt into a silent exit code 130, we add a word."""
    seen = _Stop()
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return

    def handler(signum: int, frame: Any) -> None:
        seen.signum = seen.signum or signum
        if frame is not None and frame.f_globals.get("__name__") == "llama_cpp._logger":
            # Inside llama.cpp's log hook, a ctypes callback: an exception raised there is
            # printed and swallowed, and the run would go on to exit 0. Ask again shortly,
            # once the model load has left the callback.
            threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
            return
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield seen
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI in-process and return the exit code (143 after SIGTERM, as a shell
    reports a process it terminated)."""
    args = list(sys.argv[1:] if argv is None else argv)
    _logging()
    with _sigint() as interrupted:
        code = _invoke(args, interrupted)
    if code == 130 and interrupted.signum and not interrupted.said:
        print("interrupted", file=sys.stderr)
    if code == 130 and interrupted.signum == signal.SIGTERM:
        return 128 + signal.SIGTERM
    return code


def _invoke(args: list[str], interrupted: _Stop) -> int:
    try:
        result = app(args=args, prog_name="userturn", standalone_mode=False)
    except UserError as exc:
        return _error(str(exc))
    except ResourceError as exc:
        print(f"error: {redact(str(exc))}", file=sys.stderr)
        return 1
    except Interrupted as exc:
        print(redact(str(exc)), file=sys.stderr)
        interrupted.said = True  # with what was kept
        return 130
    except _classes("NoArgsIsHelpError") as exc:
        print(exc.ctx.get_help())  # type: ignore[attr-defined]
        return 0
    except _classes("Exit") as exc:
        return int(exc.exit_code)  # type: ignore[attr-defined]
    except _classes("ClickException") as exc:
        return _error(_usage_line(exc))
    except _classes("Abort"):
        return _error("aborted")
    return int(result) if isinstance(result, int) else 0


def _usage_line(exc: BaseException) -> str:
    """``field '--limit': 'x' is not a valid integer.``: the flag as the user typed it."""
    param = getattr(exc, "param", None)
    opts = [o for o in getattr(param, "opts", []) if o.startswith("--")]
    raw = getattr(exc, "message", None)
    if opts and raw:
        return f"field '{opts[0]}': {str(raw).splitlines()[0]}"
    msg = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    msg = msg.splitlines()[0] if msg else type(exc).__name__
    name = getattr(param, "name", None)
    if name and getattr(param, "param_type_name", "") == "argument":
        return f"{name.upper()}: {msg}"
    return msg


def entrypoint() -> None:
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # `userturn data list | head`: the reader left, not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 141
    sys.exit(code)
