"""The annotation server: a small FastAPI app over one packet folder.

It serves a plain HTML/JS page (no CDN, no external asset; the Content-Security-Policy
forbids any) and a JSON API that only ever sends what :func:`packet.blind` kept: opaque
ids, context messages and the candidate user turn. Submissions are validated by pydantic
(unknown labels, non-boolean σ or odd annotator names get 422, unknown ids 404) and
committed to ``annotations.sqlite`` before the response, so nothing is lost if the tab
closes or the server dies. FastAPI's interactive docs are off: they load from a CDN.
"""

from __future__ import annotations

import json
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
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from pydantic import BaseModel, ConfigDict, StrictBool, StringConstraints, model_validator
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

MAX_BODY = 64 * 1024
"""Bytes a request body may have: a submission is under 3 KB (a 2000-character note at
most), so anything larger is refused with 413 before it is read, not parsed whole."""
LOCAL_HOSTS = ("127.0.0.1", "localhost")
"""Host headers always allowed, besides the address the server is bound to: a page on
another name that resolves here (DNS rebinding) sends its own name and is refused."""

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

    @model_validator(mode="after")
    def _agrees_with_sigma(self) -> Submission:
        """σ and the label must agree, as ``agree`` requires: only plausible_followup is a
        genuine follow-up, every failure label is not, and ``other`` goes either way."""
        if self.label != "other" and self.genuine != (self.label == "plausible_followup"):
            said = "a genuine follow-up" if self.genuine else "not a genuine follow-up"
            raise ValueError(
                f"label {self.label!r} contradicts genuine={str(self.genuine).lower()}: "
                f"the turn was marked {said}; choose plausible_followup for a genuine one, "
                "a failure label for one that is not, or other"
            )
        return self


def create_app(packet_dir: Path, hosts: tuple[str, ...] = LOCAL_HOSTS) -> FastAPI:
    """Build the app for one packet folder (the DB is created inside it); ``hosts`` are
    the Host header names it answers."""
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
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    _add_assets(app)
    _add_api(app, packet, db)
    return _Guard(app, frozenset(h.lower() for h in hosts))  # type: ignore[return-value]


class _Guard:
    """ASGI wrapper, outermost: refuses an unknown Host (421) and a body over
    ``MAX_BODY`` (413), counting bytes as they arrive, so a 300 MB PUT is never held."""

    def __init__(self, app: FastAPI, hosts: frozenset[str]) -> None:
        self.app, self.hosts = app, hosts
        self.state = app.state

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = _host_name(headers.get("host", ""))
        if host not in self.hosts:
            await _plain(send, 421, f"unknown host {host!r}: open the address the server printed")
            return
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY):
            await _plain(send, 413, f"request body over {MAX_BODY} bytes")
            return
        if declared is None:  # streamed without a length: buffered up to the limit
            messages, size = [], 0
            while True:
                message = await receive()
                messages.append(message)
                size += len(message.get("body", b""))
                if size > MAX_BODY:
                    await _plain(send, 413, f"request body over {MAX_BODY} bytes")
                    return
                if message["type"] != "http.request" or not message.get("more_body"):
                    break
            replay = iter(messages)

            async def buffered() -> Any:
                return next(replay, None) or await receive()

            await self.app(scope, buffered, send)
            return
        await self.app(scope, receive, send)


def _host_name(header: str) -> str:
    """``127.0.0.1:8765`` -> ``127.0.0.1``; ``[::1]:80`` -> ``::1``."""
    if header.startswith("["):
        return header[1:].partition("]")[0].lower()
    return header.rpartition(":")[0].lower() if header.count(":") == 1 else header.lower()


async def _plain(send: Any, status: int, text: str) -> None:
    body = json.dumps({"detail": text}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 naming each problem, without echoing the input back (FastAPI's default)."""
    errors = [
        {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")).removeprefix("Value error, ")}
        for e in exc.errors()
    ]
    return JSONResponse(status_code=422, content={"detail": errors})


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
    app = create_app(packet_dir, hosts=(*LOCAL_HOSTS, host.strip("[]")))
    uvicorn.run(app, host=host, port=port, log_level="warning")
