"""What a call costs: the user's price table, never a built-in guess.

``USERTURN_PRICES`` is a YAML/JSON file or inline JSON mapping model -> ``{input,
output}`` USD per million tokens; ``?price_in=&price_out=`` on a spec wins over it. An
unknown price is ``None``: a cost shown as 0 would read as free.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from userturn.errors import UserError
from userturn.http.options import HTTPOptions


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6


def load_prices(env: Mapping[str, str] | None = None) -> dict[str, Price]:
    """The user's price table from ``USERTURN_PRICES`` (a file path or inline JSON)."""
    raw = (env if env is not None else os.environ).get("USERTURN_PRICES", "").strip()
    if not raw:
        return {}
    where = "USERTURN_PRICES"
    if not raw.startswith("{"):
        path = Path(raw)
        if not path.is_file():
            raise UserError("price table file not found", file=raw, field="USERTURN_PRICES")
        raw, where = path.read_text(encoding="utf-8"), str(path)
    try:
        data = yaml.safe_load(raw)
        return {str(m): Price(float(p["input"]), float(p["output"])) for m, p in data.items()}
    except (yaml.YAMLError, AttributeError, KeyError, TypeError, ValueError) as exc:
        raise UserError(
            "price table must map model -> {input: USD/1M, output: USD/1M}",
            file=where,
            field="USERTURN_PRICES",
        ) from exc


def price_for(model: str, options: HTTPOptions) -> Price | None:
    """``?price_in=&price_out=`` when either is set (the other is then 0), else the
    user's table; None when neither knows the model."""
    if options.price_in is not None or options.price_out is not None:
        return Price(options.price_in or 0.0, options.price_out or 0.0)
    return load_prices().get(model)
