"""The annotation server's API (FastAPI TestClient, real SQLite) and the blinding test.

Blinding: runs whose model, dataset, item ids, reference turns, judge names, rationales,
hashes, seeds and temperatures carry unique markers (annotate_helpers.MARKERS) are
exported and served; no byte of any response (HTML, JS, CSS, JSON, error bodies,
headers) may contain a marker, for every example. One run is Store-built (every hidden
field marked), one is made by the real pipeline on the embedded model.

Run: ``.venv/bin/python -m pytest tests/annotate/test_annotate_app.py -q``
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from annotate_helpers import MARKERS

from userturn.annotate import ExportOptions, export_packet
from userturn.annotate.app import create_app
from userturn.annotate.db import AnnotationDB
from userturn.rundir.lines import iter_records
from userturn.rundir.store import STORE_NAME, Store
from userturn.types import LABELS

fastapi = pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402


def make_packet(run: Path, tmp_path: Path, n: int = 8) -> tuple[Path, dict[str, Any]]:
    packet = tmp_path / "packet"
    res = export_packet(run, packet, ExportOptions(n=n, duplicates=2, seed=5))
    return packet, json.loads(res.key.read_text())


@pytest.fixture()
def client(store_run: Path, tmp_path: Path) -> TestClient:
    packet, _ = make_packet(store_run, tmp_path)
    return TestClient(create_app(packet), base_url="http://127.0.0.1")


def first_id(client: TestClient) -> str:
    return str(client.get("/api/packet").json()["ids"][0])


def put(client: TestClient, ex_id: str, **body: Any) -> Any:
    body = {"annotator": "ann", "genuine": True, "label": "plausible_followup"} | body
    return client.put(f"/api/annotations/{ex_id}", json=body)


def test_submit_and_read_back(client: TestClient) -> None:
    ex_id = first_id(client)
    r = put(client, ex_id, note="  a <b>note</b> ")
    assert r.status_code == 200
    assert r.json() == {
        "id": ex_id,
        "genuine": True,
        "label": "plausible_followup",
        "note": "a <b>note</b>",
        "done": 1,
        "total": 10,
    }
    assert put(client, ex_id, genuine=False, label="other").json()["done"] == 1  # replaced
    got = client.get("/api/annotations", params={"annotator": "ann"}).json()
    assert got["annotations"] == [{"id": ex_id, "genuine": False, "label": "other", "note": ""}]
    assert client.get("/api/annotations", params={"annotator": "other"}).json()["done"] == 0


@pytest.mark.parametrize(
    ("change", "status"),
    [
        ({"label": "plausible"}, 422),
        ({"label": None}, 422),
        ({"genuine": "yes"}, 422),
        ({"genuine": 1}, 422),
        ({"annotator": ""}, 422),
        ({"annotator": "<script>"}, 422),
        ({"annotator": "x" * 65}, 422),
        ({"note": "x" * 2001}, 422),
        ({"extra": 1}, 422),
    ],
)
def test_invalid_input_is_rejected(client: TestClient, change: dict[str, Any], status: int) -> None:
    assert put(client, first_id(client), **change).status_code == status


def test_unknown_ids_and_missing_fields(client: TestClient) -> None:
    assert put(client, "nope").status_code == 404
    assert client.get("/api/examples/nope").status_code == 404
    r = client.put(f"/api/annotations/{first_id(client)}", json={"annotator": "a"})
    assert r.status_code == 422
    assert client.get("/api/annotations").status_code == 422
    assert client.get("/api/annotations", params={"annotator": "a/b"}).status_code == 422
    for path in ("/docs", "/redoc", "/openapi.json"):  # swagger would load from a CDN
        assert client.get(path).status_code == 404


def test_annotators_submitting_at_once(client: TestClient) -> None:
    ids = client.get("/api/packet").json()["ids"]
    jobs = [(who, ex_id) for who in ("a", "b", "c") for ex_id in ids]
    with ThreadPoolExecutor(max_workers=6) as pool:
        codes = list(pool.map(lambda j: put(client, j[1], annotator=j[0]).status_code, jobs))
    assert codes == [200] * len(jobs)
    for who in ("a", "b", "c"):
        got = client.get("/api/annotations", params={"annotator": who}).json()
        assert got["done"] == len(ids) and {a["id"] for a in got["annotations"]} == set(ids)


def test_annotations_survive_a_new_server(store_run: Path, tmp_path: Path) -> None:
    packet, _ = make_packet(store_run, tmp_path)
    first = TestClient(create_app(packet), base_url="http://127.0.0.1")
    ids = first.get("/api/packet").json()["ids"]
    for i, ex_id in enumerate(ids[:3]):
        label = "plausible_followup" if i == 0 else "degenerate_short"
        assert put(first, ex_id, annotator="a", genuine=i == 0, label=label).status_code == 200
    assert put(first, ids[0], annotator="b", label="other").status_code == 200
    second = TestClient(
        create_app(packet), base_url="http://127.0.0.1"
    )  # as after a crash: only the SQLite file is left
    assert second.get("/api/annotations", params={"annotator": "a"}).json()["done"] == 3
    rows = AnnotationDB.in_packet(packet).all()
    assert sorted((r.annotator, r.example_id) for r in rows) == sorted(
        [("a", i) for i in ids[:3]] + [("b", ids[0])]
    )


def test_page_loads_nothing_external(client: TestClient) -> None:
    html = client.get("/")
    assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in html.headers["content-security-policy"]
    assets = re.findall(r'(?:src|href)="([^"]+)"', html.text)
    assert assets == ["/static/app.css", "/static/app.js"]
    for path in assets:
        body = client.get(path).text
        assert not re.search(r"https?:|//[a-z]|url\(|@import", body), path
    js = client.get("/static/app.js").text  # packet text only ever goes in as textContent
    assert not re.search(r"\.(inner|outer)HTML\s*=|insertAdjacentHTML|document\.write", js)


def all_responses(client: TestClient) -> list[tuple[str, Any]]:
    """Every kind of response the server sends, for every example."""
    got = [client.get(p) for p in ("/", "/static/app.js", "/static/app.css", "/api/packet")]
    for ex_id in client.get("/api/packet").json()["ids"]:
        got += [
            client.get(f"/api/examples/{ex_id}"),
            put(client, ex_id),
            put(client, ex_id, label="bad"),
        ]
    got += [
        client.get("/api/annotations", params={"annotator": "ann"}),
        client.get("/api/examples/zzz"),
        client.get("/missing"),
    ]
    return [(r.url.path, r) for r in got]


def check_blind(run: Path, tmp_path: Path) -> int:
    packet, key = make_packet(run, tmp_path)
    client = TestClient(create_app(packet), base_url="http://127.0.0.1")
    store = Store(run / STORE_NAME)
    records = {r["id"]: r for r in iter_records(store)}
    store.close()
    hidden = ['"rationale"', "genuine_followup", '"judge"', "reference_turn"]
    for path, r in all_responses(client):
        blob = r.content.decode() + json.dumps(dict(r.headers))
        leaked = [m for m in (*MARKERS, *hidden, *records) if m in blob]
        assert leaked == [], f"{path} leaks {leaked}"
    for e in key["examples"]:  # what is shown is exactly the context and the user turn
        shown = client.get(f"/api/examples/{e['id']}").json()
        rec = records[e["record_id"]]
        assert set(shown) == {"id", "position", "total", "messages", "user_turn"}
        assert shown["messages"] == [
            {"role": m["role"], "content": m["content"]} for m in rec["messages"]
        ]
        assert shown["user_turn"] == rec["user_turn"]
    return len(key["examples"])


def test_blinding_on_a_marked_store_run(store_run: Path, tmp_path: Path) -> None:
    assert check_blind(store_run, tmp_path) == 10


def test_blinding_on_a_real_run(real_run: Path, tmp_path: Path) -> None:
    assert check_blind(real_run, tmp_path) == 10  # 8 of the 9 user turns + 2 replants


def test_labels_offered_are_exactly_the_eight(client: TestClient) -> None:
    assert client.get("/api/packet").json()["labels"] == list(LABELS)
