"""Which failures are retried, and how long to wait first.

429 has its own budget and honours ``Retry-After`` / ``retry-after-ms`` (a rate limit is
the server asking us to wait, not a failure). 5xx, 408/409, timeouts and replies that
aren't JSON get exponential backoff with jitter. Other 4xx are not retried.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass

from userturn.http.options import HTTPOptions

RETRYABLE_STATUS = frozenset({408, 409})


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = HTTPOptions.max_retries
    rate_limit_retries: int = HTTPOptions.rate_limit_retries
    backoff: float = HTTPOptions.backoff
    max_backoff: float = 30.0
    max_retry_after: float = 120.0

    @classmethod
    def of(cls, options: HTTPOptions) -> RetryPolicy:
        return cls(options.max_retries, options.rate_limit_retries, options.backoff)

    def delay(self, attempt: int) -> float:
        base = min(self.max_backoff, self.backoff * 2.0**attempt)
        return base * (0.5 + random.random() / 2)

    def wait(self, hinted: float | None, attempt: int) -> float:
        """The server's ``Retry-After`` when it gave one (capped), else the backoff."""
        if hinted is not None and hinted > 0:
            return min(hinted, self.max_retry_after)
        return self.delay(attempt)


def retryable(status: int) -> bool:
    return status >= 500 or status in RETRYABLE_STATUS


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date)."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time()) if when else None
