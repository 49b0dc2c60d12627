"""The annotation server: a small FastAPI app over one packet folder.

It serves a plain HTML/JS page (no CDN, no external asset; the Content-Security-Policy
forbids any) and a JSON API that only ever sends what :func:`packet.blind` kept: opaque
ids, context messages and the candidate user turn. Submissions are validated by pydantic
(unknown labels, non-boolean σ or odd annotator names get 422, unknown ids 404) and
committed to ``annotations.sqlite`` before the response, so nothing is lost if the tab
closes or the server dies. FastAPI's interactive docs are off: they load from a CDN.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from userturn.annotate.db import AnnotationDB
from userturn.annotate.packet import Packet, load_packet
from userturn.errors import missing_extra
from userturn.types import LABELS, Label

try:
    from fastapi import FastAPI, HTTPException, Query, Request, Response
    from pydantic import BaseModel, ConfigDict, StrictBool, StringConstraints
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the extra
    raise missing_extra("annotate", "fastapi") from exc

STATIC = Path(__file__).resolve().parent / "static"
ASSETS = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/static/app.css": ("app.css", "text/css; charset=utf-8"),
}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

AnnotatorName = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=64, pattern=r"^\w[\w .'-]*$"),
]
Note = Annotated[str, StringConstraints(strip_whitespace=True, max_length=2000)]


class Submission(BaseModel):
    """One annotator's verdict on one example; anything extra is rejected."""

    model_config = ConfigDict(extra="forbid")
    annotator: AnnotatorName
    genuine: StrictBool
    label: Label
    note: Note = ""


def create_app(packet_dir: Path) -> FastAPI:
    """Build the app for one packet folder (the DB is created inside it)."""
    packet = load_packet(packet_dir)
    db = AnnotationDB.in_packet(packet_dir)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        db.close()

    app = FastAPI(
        title="annotation", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan
    )
    app.middleware("http")(_security_headers)
    _add_assets(app)
    _add_api(app, packet, db)
    return app


async def _security_headers(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    response = await call_next(request)
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cache-Control"] = "no-store"
    return response


def _add_assets(app: FastAPI) -> None:
    for route, (name, media) in ASSETS.items():
        body = (STATIC / name).read_bytes()

        def serve(body: bytes = body, media: str = media) -> Response:
            return Response(content=body, media_type=media)

        app.get(route, include_in_schema=False)(serve)


def _add_api(app: FastAPI, packet: Packet, db: AnnotationDB) -> None:
    position = {e.id: i for i, e in enumerate(packet.examples)}

    @app.get("/api/packet")
    def packet_info() -> dict[str, Any]:
        return {"total": len(packet.examples), "ids": packet.ids(), "labels": list(LABELS)}

    @app.get("/api/examples/{ex_id}")
    def example(ex_id: str) -> dict[str, Any]:
        i = _position(position, ex_id)
        ex = packet.examples[i]
        return {
            "id": ex.id,
            "position": i,
            "total": len(packet.examples),
            "messages": list(ex.messages),
            "user_turn": ex.user_turn,
        }

    @app.get("/api/annotations")
    def annotations(annotator: Annotated[AnnotatorName, Query()]) -> dict[str, Any]:
        rows = [a for a in db.for_annotator(annotator) if a.example_id in position]
        return {
            "annotator": annotator,
            "done": len(rows),
            "total": len(position),
            "annotations": [
                {"id": a.example_id, "genuine": a.genuine, "label": a.label, "note": a.note}
                for a in rows
            ],
        }

    @app.put("/api/annotations/{ex_id}")
    def submit(ex_id: str, body: Submission) -> dict[str, Any]:
        _position(position, ex_id)
        saved = db.save(body.annotator, ex_id, body.genuine, body.label, body.note)
        done = sum(a.example_id in position for a in db.for_annotator(body.annotator))
        return {
            "id": ex_id,
            "genuine": saved.genuine,
            "label": saved.label,
            "note": saved.note,
            "done": done,
            "total": len(position),
        }


def _position(position: dict[str, int], ex_id: str) -> int:
    if ex_id not in position:
        raise HTTPException(status_code=404, detail="unknown example id")
    return position[ex_id]


def serve(packet_dir: Path, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Run the app with uvicorn until interrupted."""
    try:
        import uvicorn
    except ModuleNotFoundError as exc:
        raise missing_extra("annotate", "uvicorn") from exc
    uvicorn.run(create_app(packet_dir), host=host, port=port, log_level="warning")
