"""Talking to OpenAI-compatible servers: one client (``client``) that owns the thread
pool, the deadline and the accounting, with its parts beside it: ``options`` (the typed
transport options), ``limits`` (AIMD), ``retry`` (what is retried and how long to wait,
Retry-After included), ``prices``, ``failures`` (results and reasons in words) and
``shapes`` (which optional fields each server takes). Import from here.
"""

from userturn.http.client import OpenAIClient, Usage, model_fingerprint, read_by
from userturn.http.failures import (
    BadReply,
    CallResult,
    FinalIf,
    connection_reason,
    error_param,
    refuses,
    warn_once,
)
from userturn.http.limits import AdaptiveLimiter
from userturn.http.options import (
    TRANSPORT_OPTIONS,
    HTTPOptions,
    http_options,
    resolve_api_key,
    resolve_base_url,
)
from userturn.http.prices import Price, load_prices, price_for
from userturn.http.retry import RetryPolicy, retry_after
from userturn.http.shapes import ShapeBook, ShapeDetector

__all__ = [
    "TRANSPORT_OPTIONS",
    "AdaptiveLimiter",
    "BadReply",
    "CallResult",
    "FinalIf",
    "HTTPOptions",
    "OpenAIClient",
    "Price",
    "RetryPolicy",
    "ShapeBook",
    "ShapeDetector",
    "Usage",
    "connection_reason",
    "error_param",
    "http_options",
    "load_prices",
    "model_fingerprint",
    "price_for",
    "read_by",
    "refuses",
    "resolve_api_key",
    "resolve_base_url",
    "retry_after",
    "warn_once",
]
