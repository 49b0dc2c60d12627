"""Credentials in URLs never reach a file, a log or an error line.

Run: ``.venv/bin/python -m pytest tests/test_redact.py -q`` (about half a minute: one run
against the fault server with an LLM judge, its report, and a run against a dead port).

The end-to-end test plants a secret in the model's and the judge's base URL, runs,
judges, reports and fails, and then reads every file the run directory holds and all
that was printed: the secret is nowhere.
"""

from __future__ import annotations

import json
import logging
import socket
from pathlib import Path
from urllib.parse import urlencode

import pytest

from fault_server import FaultServer
from userturn.cli import main
from userturn.redact import redact, redact_data

SECRET = "sk-planted-9c1e"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("http://alice:sk-1@host:8000/v1", "http://***@host:8000/v1"),
        ("cannot reach https://tok@h/v1: refused", "cannot reach https://***@h/v1: refused"),
        ("https://h/v1?api_key=sk-1&x=1", "https://h/v1?api_key=***&x=1"),
        ("m?" + urlencode({"base_url": "http://u:p@h/v1"}), "m?base_url=http%3A%2F%2F***%40h%2Fv1"),
        ("write to alice@example.com", "write to alice@example.com"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ],
)
def test_redact_masks_userinfo_and_secret_query_values(text: str, shown: str) -> None:
    assert redact(text) == shown


def test_redact_data_reaches_every_string() -> None:
    data = {"models": [{"spec": "openai:m?base_url=http://a:b@h/v1"}], "n": 3}
    assert redact_data(data) == {"models": [{"spec": "openai:m?base_url=http://***@h/v1"}], "n": 3}


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _every_file(root: Path) -> list[tuple[Path, bytes]]:
    return [(p, p.read_bytes()) for p in sorted(root.rglob("*")) if p.is_file()]


def test_a_planted_secret_reaches_no_output(
    tmp_path: Path,
    shared_dir: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    items = tmp_path / "items.jsonl"
    items.write_text(
        json.dumps({"id": "a", "messages": [{"role": "user", "content": "What is 2+3?"}]}) + "\n"
    )
    template = shared_dir / "chat_templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"
    out = tmp_path / "run"
    with FaultServer(lifetime=120) as srv:
        url = srv.base_url.replace("http://", f"http://alice:{SECRET}@")
        model = f"openai:fault-model?base_url={url}&backoff=0.01"
        judge = f"openai:fault-model?base_url={url}&cache=off&backoff=0.01"
        common = ["--dataset", f"jsonl:{items}", "--chat-template", str(template)]
        argv = ["run", "--model", model, "--judge", judge, *common, "--out", str(out)]
        assert main([*argv, "--max-answer-tokens", "8", "--max-user-tokens", "8"]) == 0
        assert main(["report", "--run", str(out)]) == 0
    dead = f"http://alice:{SECRET}@127.0.0.1:{_dead_port()}/v1"
    failed = ["run", "--model", f"openai:m?base_url={dead}", "--judge", "rules", *common]
    assert main([*failed, "--out", str(tmp_path / "dead")]) == 2
    printed = capsys.readouterr()
    assert "http://***@127.0.0.1" in printed.err  # the error line still names the server
    files = _every_file(tmp_path)
    assert any(p.name == "manifest.yaml" for p, _ in files)
    assert any(p.name == "report.html" for p, _ in files)
    leaks = [str(p) for p, data in files if SECRET.encode() in data]
    leaks += [
        name for name, text in [("stdout", printed.out), ("stderr", printed.err)] if SECRET in text
    ]
    leaks += ["log" for r in caplog.records if SECRET in r.getMessage()]
    assert leaks == []
