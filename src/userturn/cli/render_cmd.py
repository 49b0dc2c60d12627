"""``userturn render``: print the exact user-turn prompt a model would continue."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any, cast

import typer

from userturn.backends import load_backend
from userturn.backends.base import TemplateOptions
from userturn.chat import (
    SYSTEM_PLACEMENTS,
    ChatTemplate,
    SystemPlacement,
    derive_markers,
    user_turn_prompt,
)
from userturn.cli import options
from userturn.datasets.base import check_messages
from userturn.errors import UserError, read_text


def _read_messages(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(read_text(path, "messages file"))
    except json.JSONDecodeError as exc:
        raise UserError(f"invalid JSON: {exc.msg}", file=str(path), line=exc.lineno) from exc
    if isinstance(data, dict):
        data = data.get("messages")
    return list(check_messages(data, path, 1))


SHOWN_IDS = 64


def _details(header: str, stop: list[str], ids: list[int] | None) -> list[str]:
    """What plain mode adds on stderr, so stdout stays the exact prompt (pipeable)."""
    lines = [f"user header: {header!r}", f"stop: {stop!r}"]
    if ids is None:
        lines.append("token ids: none (a bare template has no tokenizer; use --model)")
    elif len(ids) <= SHOWN_IDS:
        lines.append(f"token ids ({len(ids)}): {ids}")
    else:
        half = SHOWN_IDS // 2
        lines.append(f"token ids ({len(ids)}): {ids[:half]} ... {ids[-half:]} (all: --json)")
    return lines


def render(
    messages: Path = typer.Option(
        ...,
        "--messages",
        help='JSON: a message list ending with the assistant turn (or {"messages": [...]}).',
    ),
    model: str = typer.Option(None, "--model", help="Model spec (its own template)."),
    template: Path = typer.Option(None, "--template", help="A bare template file."),
    bos_token: str = typer.Option(None, "--bos-token"),
    eos_token: str = typer.Option(None, "--eos-token"),
    chat_template_kwargs: str = typer.Option(None, "--chat-template-kwargs", help="JSON."),
    date: str = typer.Option(None, "--date", help="Date for strftime_now (YYYY-MM-DD)."),
    system_placement: str = typer.Option(
        "template", "--system-placement", help="template | first-turn (see `run --help`)."
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print prompt, user_header, stop, token_ids as JSON."
    ),
) -> int:
    """Print the exact user-turn prompt on stdout (the conversation plus the template's
    user header), and its user header, stop strings and token ids on stderr (--json: all
    of them as one object on stdout)."""
    if (model is None) == (template is None):
        raise UserError("give exactly one of --model or --template", field="--model")
    if system_placement not in SYSTEM_PLACEMENTS:
        raise UserError(
            f"expected one of {', '.join(SYSTEM_PLACEMENTS)}", field="--system-placement"
        )
    msgs = _read_messages(messages)
    kwargs = (
        options.json_object(chat_template_kwargs, "--chat-template-kwargs")
        if chat_template_kwargs
        else {}
    )
    day = options.date(date, "--date") if date else dt.date.today()
    backend = None
    if model is not None:
        backend = load_backend(model)
        tpl = backend.template(TemplateOptions(date=day, bos_token=bos_token, eos_token=eos_token))
    else:
        tpl = ChatTemplate(
            read_text(template, "template file"),
            str(template),
            bos_token or "",
            eos_token or "",
            date=day,
        )
    placement = cast(SystemPlacement, system_placement)
    up = user_turn_prompt(
        tpl, msgs, derive_markers(tpl, **kwargs), system_placement=placement, **kwargs
    )
    ids = backend.tokenize(up.prompt) if backend is not None else None
    if not as_json:
        typer.echo(up.prompt, nl=False)
        for line in _details(up.user_header, list(up.stop), ids):
            typer.echo(line, err=True)
        return 0
    out: dict[str, Any] = {
        "prompt": up.prompt,
        "user_header": up.user_header,
        "stop": list(up.stop),
        "prompt_sha": up.prompt_sha,
        "template_sha": up.template_sha,
        "content_survived": up.content_survived,
        "removed": up.removed,
        "system_folded": up.system_folded,
        "token_ids": ids,
    }
    typer.echo(json.dumps(out, ensure_ascii=False, indent=2))
    return 0


def register(app: typer.Typer) -> None:
    app.command("render")(render)
