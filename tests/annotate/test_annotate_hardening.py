"""Annotation server hardening against a real ``userturn annotate serve`` on 127.0.0.1:
labels that contradict σ, the body limit, the Host allow-list (DNS rebinding), and
damaged packet files in ``serve`` and ``import``.

Run: ``.venv/bin/python -m pytest tests/annotate/test_annotate_hardening.py -q``
"""

from __future__ import annotations

import http.client
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from annotate_helpers import Server

from userturn.annotate import ExportOptions, export_packet
from userturn.cli import main

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")


@pytest.fixture()
def packet(store_run: Path, tmp_path: Path) -> Path:
    out = tmp_path / "packet"
    export_packet(store_run, out, ExportOptions(n=4, seed=1))
    return out


@pytest.fixture()
def server(packet: Path) -> Iterator[Server]:
    srv = Server(packet)
    srv.start()
    yield srv
    srv.kill()


def _request(
    srv: Server, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    try:
        conn.request(method, path, body=body or None, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _put(srv: Server, **body: Any) -> tuple[int, Any]:
    status, data = _request(srv, "GET", "/api/packet")
    ex_id = json.loads(data)["ids"][0]
    payload = {"annotator": "ann", "genuine": True, "label": "plausible_followup"} | body
    status, data = _request(
        srv,
        "PUT",
        f"/api/annotations/{ex_id}",
        json.dumps(payload).encode(),
        {"Content-Type": "application/json"},
    )
    return status, json.loads(data)


@pytest.mark.parametrize(
    ("genuine", "label", "ok"),
    [
        (True, "previous_turn_restate", False),
        (True, "degenerate_short", False),
        (False, "plausible_followup", False),
        (True, "other", True),
        (False, "other", True),
        (False, "meta_planning", True),
    ],
)
def test_a_label_that_contradicts_sigma_is_refused(
    server: Server, genuine: bool, label: str, ok: bool
) -> None:
    status, data = _put(server, genuine=genuine, label=label)
    if ok:
        assert status == 200 and data["label"] == label
    else:
        assert status == 422
        assert f"label '{label}' contradicts genuine={str(genuine).lower()}" in json.dumps(data)


def test_a_rejected_body_is_not_echoed(server: Server) -> None:
    status, data = _put(server, note="z" * 3000)
    assert status == 422 and "zzzz" not in json.dumps(data)


def test_a_body_over_the_limit_is_refused_before_it_is_read(server: Server) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:  # declares 300 MB and sends none of it: the answer must come anyway
        conn.putrequest("PUT", "/api/annotations/x")
        conn.putheader("Content-Length", str(300 * 1024 * 1024))
        conn.putheader("Content-Type", "application/json")
        conn.endheaders()
        assert conn.getresponse().status == 413
    finally:
        conn.close()
    chunked = json.dumps({"note": "y" * 200_000}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:  # no length given: counted as it streams
        conn.request("PUT", "/api/annotations/x", body=iter([chunked]), encode_chunked=True)
        assert conn.getresponse().status == 413
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("evil.example", 421),
        ("evil.example:{port}", 421),
        ("127.0.0.1.nip.io:{port}", 421),
        ("127.0.0.1:{port}", 200),
        ("localhost:{port}", 200),
        ("LOCALHOST", 200),
    ],
)
def test_only_local_host_names_are_answered(server: Server, host: str, status: int) -> None:
    got, _ = _request(server, "GET", "/api/packet", headers={"Host": host.format(port=server.port)})
    assert got == status


def _damage(packet: Path, what: str) -> None:
    if what == "key":
        key = packet.parent / f"{packet.name}.key.json"
        key.write_text(key.read_text()[:50], encoding="utf-8")
    elif what == "sqlite":
        (packet / "annotations.sqlite").write_bytes(b"not a database" * 100)
    elif what == "examples":
        path = packet / "examples.jsonl"
        path.write_text(path.read_text()[:-40], encoding="utf-8")
    elif what == "examples_type":
        (packet / "examples.jsonl").write_text('{"id": 3}\n', encoding="utf-8")


@pytest.mark.parametrize("what", ["key", "sqlite", "examples", "examples_type"])
@pytest.mark.parametrize("command", ["import", "serve"])
def test_damaged_packet_files_are_one_line(
    packet: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    command: str,
    what: str,
) -> None:
    if what == "key" and command == "serve":
        pytest.skip("serve does not read the key")
    damaged = tmp_path / "damaged"
    shutil.copytree(packet, damaged)
    key = packet.parent / f"{packet.name}.key.json"
    if key.exists():
        shutil.copy(key, tmp_path / "damaged.key.json")
    _damage(damaged, what)
    argv = ["annotate", command, str(damaged)]
    argv += ["--out", str(tmp_path / "labels")] if command == "import" else ["--port", "1"]
    capfd.readouterr()
    code = main(argv)
    err = capfd.readouterr().err.strip()
    assert "Traceback" not in err
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("error: "), err
