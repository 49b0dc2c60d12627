"""Credentials in URLs never reach a file, a log or an error line.

A base URL may carry a key (``http://alice:sk-...@host/v1``, or ``?api_key=`` in its
query). Everything userturn writes for people to read or share (manifest.yaml,
report.html, stored error reasons, stderr) goes through ``redact``, which keeps the
scheme, host and path, so a reader can still tell which server it was.
"""

from __future__ import annotations

import logging
import re
from typing import Any

MASK = "***"
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]{0,15}://)[^\s/?#@\"'<>]{1,512}@")
_USERINFO_QUOTED = re.compile(
    r"(?i)(%3A%2F%2F)[^\s/?#@&\"'<>%]{0,512}(?:%(?!40)[0-9a-f]{2}[^\s/?#@&\"'<>%]{0,512}){0,64}%40"
)
"""The same inside a percent-encoded query value (``?base_url=http%3A%2F%2Fu%3Ap%40h``)."""
_SECRET_QUERY = re.compile(
    r"(?i)([?&](?:api[_-]?key|key|token|access[_-]?token|secret|password|sig)=)[^&#\s\"'<>]+"
)


def redact(text: str) -> str:
    """``text`` with any URL's ``user:password@`` and secret query values masked."""
    if "@" not in text and "=" not in text and "%40" not in text.upper():
        return text
    text = _USERINFO_QUOTED.sub(rf"\g<1>{MASK}%40", _USERINFO.sub(rf"\g<1>{MASK}@", text))
    return _SECRET_QUERY.sub(rf"\g<1>{MASK}", text)


class RedactingFilter(logging.Filter):
    """Masks a record's message before any handler sees it: for the HTTP libraries under
    the SDK, which log each request's URL as given, credentials included."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        shown = redact(message)
        if shown != message:
            record.msg, record.args = shown, ()
        return True


def redact_logs(*names: str) -> None:
    """Put one ``RedactingFilter`` on each named logger (once)."""
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactingFilter) for f in logger.filters):
            logger.addFilter(RedactingFilter())


def redact_data(data: Any) -> Any:
    """``redact`` over every string in a JSON/YAML-like value (keys included)."""
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, dict):
        return {redact_data(k): redact_data(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return type(data)(redact_data(v) for v in data)
    return data
