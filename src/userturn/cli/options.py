"""Parsing of flag values shared by several commands, each with a one-line error that
names the flag as the user typed it."""

from __future__ import annotations

import datetime as dt
import json
import math
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
