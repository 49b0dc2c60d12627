"""How to reach a model on an OpenAI-compatible server: the transport options, typed.

None of them is part of a model's identity: moving a server, changing the concurrency or
the key's variable keeps every id and key (``TRANSPORT_OPTIONS``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlparse

from userturn.errors import UserError

TRANSPORT_OPTIONS = frozenset(
    {
        "base_url",
        "api_key_env",
        "concurrency",
        "timeout",
        "max_retries",
        "rate_limit_retries",
        "backoff",
        "price_in",
        "price_out",
    }
)
"""Spec options that say how to reach a model, not which model: kept out of ids and keys."""
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0"})


@dataclass(frozen=True)
class HTTPOptions:
    """The ``registry.HTTP`` options, typed, as a backend or judge hands them to a client."""

    base_url: str | None = None
    api_key_env: str | None = None
    """None: ``OPENAI_API_KEY``."""
    concurrency: int = 64
    timeout: float = 120.0
    """Seconds one attempt may take in all, from connecting to the last byte: a deadline,
    so a server that keeps a reply trickling in can't hold a call past it."""
    max_retries: int = 4
    """5xx, 408/409, timeouts and connection errors."""
    rate_limit_retries: int = 8
    """429s: separate, larger budget, since waiting is the expected response."""
    backoff: float = 0.5
    """Base seconds of exponential backoff."""
    price_in: float | None = None
    price_out: float | None = None


def http_options(options: Mapping[str, str]) -> HTTPOptions:
    """The transport options among a spec's ``options``, checked and typed; the others
    (a model's ``tokenizer``, say) are the caller's."""
    from userturn import registry

    own = {k: v for k, v in options.items() if k in TRANSPORT_OPTIONS}
    return registry.typed(HTTPOptions, registry.HTTP, own, "model")


def resolve_base_url(options: HTTPOptions, base_url: str | None) -> str | None:
    """``?base_url=``, else ``--base-url``/``--judge-base-url``, else ``OPENAI_BASE_URL``."""
    return options.base_url or base_url or os.environ.get("OPENAI_BASE_URL") or None


def resolve_api_key(options: HTTPOptions, base_url: str | None) -> str:
    """The key from ``?api_key_env=``'s variable or ``OPENAI_API_KEY``; ``EMPTY`` for a
    local server, which accepts any."""
    name = options.api_key_env
    if name:
        key = os.environ.get(name)
        if not key:
            raise UserError(
                f"environment variable {name} (named by ?api_key_env=) is not set",
                field="api_key_env",
            )
        return key
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        return key
    host = urlparse(base_url or "").hostname or ""
    if base_url and host in LOCAL_HOSTS:
        return "EMPTY"  # local servers (llama.cpp, vLLM) accept any key
    raise UserError(
        "no API key: set OPENAI_API_KEY, or name another variable with "
        "?api_key_env=VAR (use OPENAI_API_KEY=EMPTY for servers without auth)",
        field="api_key",
    )
