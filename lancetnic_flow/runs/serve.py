"""A run behind HTTP: ``lancetnic-flow serve RUN``, or :func:`app` in Python.

``POST /predict`` with ``{"texts": [...], "top_k": K, "threshold": P}``
answers ``{"predictions": [...]}``, one :meth:`Predictor.predict
<.predict.Predictor.predict>` dict per text, in order; ``GET /health``
answers the run, its task and labels. The model is loaded once, before the
server listens. A request is bounded: at most ``max_batch`` texts (more is
413) and ``max_body`` bytes; a malformed one is a 4xx with
``{"error": "..."}``. Prediction runs in a worker thread, one batch at a
time, so the event loop keeps answering (``/health`` among them) and memory
holds one batch. Starlette + uvicorn: ``pip install 'lancetnic_flow[serve]'``.
"""
from __future__ import annotations

import json
import signal
import socket
import threading
from typing import Any

from ..errors import UserError

MAX_BATCH = 1000
MAX_BODY = 64 * 2**20
FIELDS = ("texts", "top_k", "threshold")


def require_serve() -> None:
    """Stop with the extra to install when Starlette or uvicorn is missing."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise UserError(f"serve needs Starlette and uvicorn ({exc.name} is not installed)",
                        "pip install 'lancetnic_flow[serve]'") from None


class BadRequest(Exception):
    """A request the server refuses: its HTTP status and the message it answers with."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def _number(doc: dict, key: str, kind: Any) -> Any:
    value = doc.get(key)
    # JSON's true/false are Python ints: never a count or a probability.
    if value is not None and (isinstance(value, bool) or not isinstance(value, kind)):
        raise BadRequest(422, f"{key} must be {'an integer' if kind is int else 'a number'}, "
                              f"got {json.dumps(value)[:40]}")
    return value


def parse_request(body: bytes, max_batch: int, classifies: bool = True) -> tuple[list, dict]:
    """A ``/predict`` body → (texts, keyword arguments of ``Predictor.predict``); a
    :class:`BadRequest` (413 for too many texts, else 400/422) saying what is wrong."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise BadRequest(400, 'the body is not JSON: send {"texts": ["a text", ...]}') from None
    if not isinstance(doc, dict):
        raise BadRequest(422, 'the body must be a JSON object: {"texts": ["a text", ...]}')
    unknown = sorted(set(doc) - set(FIELDS))
    if unknown:
        raise BadRequest(422, f"unknown field {unknown[0]!r} (the fields: {', '.join(FIELDS)})")
    texts = doc.get("texts")
    if not isinstance(texts, list):
        raise BadRequest(422, 'no "texts" list: send {"texts": ["a text", ...]}' if texts is None
                         else f"texts must be a list of strings, got {type(texts).__name__}")
    if len(texts) > max_batch:
        raise BadRequest(413, f"{len(texts):,} texts in one request; this server takes at most {max_batch:,} "
                              "(send smaller batches, or start it with a larger --max-batch)")
    for i, t in enumerate(texts):
        if t is not None and not isinstance(t, str):
            raise BadRequest(422, f"texts[{i}] is {json.dumps(t)[:40]}: each text must be a string or null")
    top_k, threshold = _number(doc, "top_k", int), _number(doc, "threshold", (int, float))
    if top_k is not None and (top_k < 1 or not classifies):
        raise BadRequest(422, f"top_k must be ≥ 1, got {top_k}" if classifies
                         else "top_k ranks labels: this run is a regression model")
    if threshold is not None and not 0.0 < threshold < 1.0:
        raise BadRequest(422, f"threshold must be between 0 and 1, got {threshold}")
    # No threshold: the run's own per label (0.5 for a run without them).
    return texts, {"top_k": top_k, "threshold": None if threshold is None else float(threshold)}


async def read_body(request: Any, limit: int) -> bytes:
    """The request's body, refused with 413 past ``limit`` bytes before it is all read."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BadRequest(413, f"the body is {int(declared):,} bytes; this server takes at most {limit:,}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BadRequest(413, f"the body is over {limit:,} bytes, the most this server takes")
        chunks.append(chunk)
    return b"".join(chunks)


def health(pred: Any, max_batch: int) -> dict:
    """What ``GET /health`` answers."""
    from ..registry import task_kind

    meta = pred.run.meta
    return {"status": "ok", "run": str(pred.run.url), "model": meta.get("model", meta.get("net")),
            "task": task_kind(meta), "labels": list(pred.labels), "max_batch": max_batch}


def app(run: Any, storage_options: dict | None = None, max_batch: int = MAX_BATCH, max_body: int = MAX_BODY):
    """The Starlette app serving ``run`` (a run folder, or a loaded :class:`~.predict.Predictor`);
    run it with any ASGI server, e.g. ``uvicorn.run(app("runs/x"), port=8000)``."""
    require_serve()
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from .predict import Predictor

    pred = run if isinstance(run, Predictor) else Predictor(run, storage_options)
    lock = threading.Lock()
    about = health(pred, max_batch)

    def predict_now(texts: list, kw: dict) -> list[dict]:
        # One batch at a time: torch already uses every core for one, and memory holds one.
        with lock:
            return pred.predict(texts, **kw) if texts else []

    async def predict(request):
        texts, kw = parse_request(await read_body(request, max_body), max_batch, pred.classifies)
        return JSONResponse({"predictions": await run_in_threadpool(predict_now, texts, kw)})

    async def alive(request):
        return JSONResponse(about)

    async def refused(request, exc: BadRequest):
        return JSONResponse({"error": exc.message}, status_code=exc.status)

    async def http_error(request, exc: HTTPException):
        return JSONResponse({"error": f"{exc.detail}: {request.method} {request.url.path} (POST /predict, "
                                      "GET /health)"}, status_code=exc.status_code)

    routes = [Route("/predict", predict, methods=["POST"]), Route("/health", alive, methods=["GET"])]
    return Starlette(routes=routes, exception_handlers={BadRequest: refused, HTTPException: http_error})


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (0: any free port), or a UserError saying why not."""
    sock = None
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        if sock is not None:
            sock.close()
        raise UserError(f"cannot listen on {host}:{port} ({exc.strerror or exc})",
                        "is another server using the port? pick another with --port, or --port 0 for any "
                        "free one") from None
    return sock


class _Stopped(Exception):
    """SIGTERM, raised after uvicorn's graceful shutdown."""


def _stop(signum: int, frame: Any) -> None:
    raise _Stopped


def serve(application: Any, sock: socket.socket, log_level: str = "info") -> None:
    """Run ``application`` with uvicorn on the bound ``sock``; return once Ctrl-C or
    SIGTERM has stopped it gracefully (answers in flight are sent first)."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(application, log_level=log_level, lifespan="off"))
    # uvicorn shuts down on the signal, then raises it again for its caller: SIGTERM's
    # default would kill the process there, so a stop by either signal is a plain return.
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _stop) if main else None
    try:
        server.run(sockets=[sock])
    except (KeyboardInterrupt, _Stopped):
        pass
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
        sock.close()


__all__ = ["app", "serve", "listen", "parse_request", "health", "require_serve", "BadRequest", "MAX_BATCH",
           "MAX_BODY"]
