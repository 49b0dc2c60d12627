"""Parsing of flag values shared by several commands, each with a one-line error that
names the flag as the user typed it."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Collection, Mapping
from typing import Any

from userturn.errors import UserError


def floats(text: str, flag: str) -> list[float]:
    """``0,0.7,1.0`` -> [0.0, 0.7, 1.0]; finite numbers only."""
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"expected comma-separated numbers, got {text!r}", field=flag) from None
    if not values:
        raise UserError(f"expected at least one number, got {text!r}", field=flag)
    if not all(math.isfinite(v) for v in values):
        raise UserError(f"numbers must be finite, got {text!r}", field=flag)
    return values


def json_object(text: str, flag: str) -> dict[str, Any]:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"invalid JSON: {exc.msg}", field=flag) from exc
    if not isinstance(obj, dict):
        raise UserError("expected a JSON object", field=flag)
    return obj


def date(text: str, flag: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise UserError(f"expected a date YYYY-MM-DD, got {text!r}", field=flag) from None


def ids(text: str, flag: str) -> list[str]:
    out = [i.strip() for i in text.split(",") if i.strip()]
    if not out:
        raise UserError(f"expected comma-separated ids, got {text!r}", field=flag)
    return out


def by_name(
    params: Mapping[str, Any],
    fields: Collection[str],
    *,
    renames: Mapping[str, str] = {},
    parsers: Mapping[str, Callable[[str], Any]] = {},
    cli_only: Collection[str] = (),
) -> dict[str, Any]:
    """A command's options (``ctx.params``) as the fields of the settings it builds.

    Every option is a field of the same name, ``renames`` where the flag reads better
    singular (``--model`` -> ``models``), or in ``cli_only`` (``--out``, ``--format``);
    anything else is a bug, caught by the first test that runs the command. So a new
    field needs one new option and nothing else, and none can be left unmapped.
    """
    values: dict[str, Any] = {}
    for name, value in params.items():
        if name in cli_only:
            continue
        key = renames.get(name, name)
        if key not in fields:
            raise AssertionError(f"option {name!r} is neither a field nor marked cli-only")
        parse = parsers.get(key)
        values[key] = parse(value) if parse is not None and value is not None else value
    return values
