"""Headless Chromium for the browser tests (report.html and the annotation UI).

One launcher so both suites run the same browser the same way: the system Chromium that
`make setup-test` installs, with networking extras off, so a page that tried to reach the
internet would fail visibly rather than hang.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextmanager
def chromium(profile: Path, *, height: int, timeout_ms: int) -> Iterator[Any]:
    """A persistent Playwright context on the system Chromium, closed on exit."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not CHROMIUM.exists():
        pytest.fail("no /usr/bin/chromium: run `make setup-test` (apt-get install chromium)")
    with sync_api.sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            headless=True,
            args=ARGS,
            viewport={"width": 1280, "height": height},
        )
        ctx.set_default_timeout(timeout_ms)
        try:
            yield ctx
        finally:
            ctx.close()
