"""A run behind HTTP: ``lancetnic-flow serve RUN``, or :func:`app` in Python.

``POST /predict`` with ``{"texts": [...], "top_k": K, "threshold": P}``
answers ``{"predictions": [...]}``, one :meth:`Predictor.predict
<.predict.Predictor.predict>` dict per text, in order, with
``"longer_than_max_len": N`` when a sequence run read N of them only to its ``--max-len``. ``GET /health`` is
a readiness probe: 503 ``{"status": "loading"}`` while the run loads, then
200 ``{"status": "ready", ...}`` with the run, its task and labels.
``POST /explain`` with ``{"texts": [...], "top": N, "label": "name"}``
answers ``{"explanations": [...]}``, one :meth:`Predictor.explain
<.predict.Predictor.explain>` dict per text (an empty list, or a sequence
model, whose output is no sum over terms, is a 422 saying so).

The command opens its port before it loads the run (in a thread, see
:class:`Model`), so a supervisor can tell a server that is loading a large
run from one that is not there; a run that fails to load stops the server
with the loading error (exit 2). Every request is bounded: at most
``max_batch`` texts and ``max_body`` bytes (413), a body whose bytes stop
for ``body_timeout`` seconds is 408, and past ``max_queue`` requests held
at once a new one is 503 with Retry-After. A malformed request is a 4xx
with ``{"error": "..."}``, never a 500; a lone surrogate in a text (JSON's
``"\\ud800"``) is read as U+FFFD, as the Python API reads it; :func:`serve` bounds connections and
answers what the HTTP parser refuses in JSON too (http_protocol.py).

At most :data:`SLOTS` requests read, parse and predict at once, in worker
threads, and prediction runs one batch at a time: the event loop keeps
answering (``/health`` among them), memory holds a few bodies and one
batch, and the other requests wait without reading their bodies.
Starlette + uvicorn: ``pip install 'lancetnic_flow[serve]'``.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import threading
import time
from typing import Any, Callable

from ..data.readers.labels import LONE_SURROGATE
from ..errors import UserError
from ..features.label_values import run_label
from ..features.vectorize import TRUNCATED, cut_rows
from ..plurals import counted, verb

MAX_BATCH = 1000
MAX_BODY = 64 * 2**20
MAX_QUEUE = 100
BODY_TIMEOUT = 30.0
# Each connection holds a file descriptor and a little memory, an idle keep-alive one too;
# past this many a new one is 503 (http_protocol.py). Well under the usual 1024 descriptors.
MAX_CONNECTIONS = 500
# Prediction is one batch at a time, so more slots only overlap reading and parsing the
# next bodies with it; each slot may hold a body of max_body bytes. Four, not two, so a
# client or two that send slowly (until body_timeout) do not stop the others.
SLOTS = 4
# A refused body up to this much past the limit is still read and dropped before the
# 413: a client that sends the whole body before it reads (urllib, `Connection: close`)
# would otherwise see the connection reset instead of the answer.
DRAIN = 64 * 2**20
RETRY = {"Retry-After": "1"}
FIELDS = ("texts", "top_k", "threshold")
EXPLAIN_FIELDS = ("texts", "top", "label")
# Terms an explanation lists at most: the answer grows with it, as with top_k.
MAX_TOP = 1000


def require_serve() -> None:
    """Stop with the extra to install when Starlette or uvicorn is missing."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise UserError(f"serve needs Starlette and uvicorn ({exc.name} is not installed)",
                        "pip install 'lancetnic_flow[serve]'") from None


class BadRequest(Exception):
    """A request the server refuses: its HTTP status, the message it answers
    with, and headers (Retry-After when asking again later will do)."""

    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


def _number(doc: dict, key: str, kind: Any) -> Any:
    value = doc.get(key)
    # JSON's true/false are Python ints: never a count or a probability.
    if value is not None and (isinstance(value, bool) or not isinstance(value, kind)):
        raise BadRequest(422, f"{key} must be {'an integer' if kind is int else 'a number'}, "
                              f"got {json.dumps(value)[:40]}")
    return value


def _kind(value: Any) -> str:
    """A JSON value's kind, in JSON's words."""
    kinds = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else kinds.get(type(value), type(value).__name__)


def _json(body: bytes) -> Any:
    """The body as JSON, or a 400 saying why it is not."""
    send = ': send {"texts": ["a text", ...]}'
    try:
        return json.loads(body)
    except UnicodeDecodeError as exc:
        raise BadRequest(400, f"the body is not UTF-8 (byte {exc.object[exc.start]:#04x} at offset {exc.start})"
                              f"{send} in UTF-8") from None
    except RecursionError:
        raise BadRequest(400, f"the body nests lists or objects too deeply to read{send}") from None
    except ValueError as exc:    # JSONDecodeError, or an integer of more digits than Python converts
        if not body.strip():
            raise BadRequest(400, f"the body is empty{send}") from None
        why = f"{exc.msg}, line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) \
            else str(exc).split(":")[0][:80]
        raise BadRequest(400, f"the body is not JSON ({why}){send}") from None


def _texts(doc: Any, fields: tuple[str, ...], max_batch: int) -> list:
    """The ``texts`` list of a request object, checked (422, or 413 past ``max_batch``)."""
    if not isinstance(doc, dict):
        raise BadRequest(422, f'the body must be a JSON object, got {_kind(doc)}: {{"texts": ["a text", ...]}}')
    unknown = sorted(set(doc) - set(fields))
    if unknown:
        raise BadRequest(422, f"unknown field {unknown[0]!r} (the fields: {', '.join(fields)})")
    texts = doc.get("texts")
    if not isinstance(texts, list):
        raise BadRequest(422, 'no "texts" list: send {"texts": ["a text", ...]}' if texts is None
                         else f"texts must be a list of strings, got {_kind(texts)}")
    if len(texts) > max_batch:
        raise BadRequest(413, f"{counted(len(texts), 'text')} in one request; this server takes at most {max_batch:,} "
                              "(send smaller batches, or start it with a larger --max-batch)")
    for i, t in enumerate(texts):
        if t is not None and not isinstance(t, str):
            raise BadRequest(422, f"texts[{i}] is {json.dumps(t)[:40]}: each text must be a string or null")
    # JSON's "\ud800" escape is no character: read as U+FFFD, as the Python API and predict read it
    # (strings_array), so a text gets the answer it gets there and every answer encodes as UTF-8.
    return [LONE_SURROGATE.sub("\ufffd", t) if t is not None and not t.isascii() else t for t in texts]


def parse_explain(body: bytes, max_batch: int, labels: list | None = None) -> tuple[list, dict]:
    """An ``/explain`` body (``{"texts": [...], "top": N, "label": "name"}``) → (texts,
    keyword arguments of ``Predictor.explain``); a :class:`BadRequest` saying what is wrong.
    An empty ``texts`` list is refused (422): there is nothing to explain."""
    doc = _json(body)
    texts = _texts(doc, EXPLAIN_FIELDS, max_batch)
    if not texts:
        raise BadRequest(422, 'texts is empty: send at least one text, {"texts": ["a text", ...]}')
    top = _number(doc, "top", int)
    if top is not None and top < 1:
        raise BadRequest(422, f"top must be ≥ 1, got {top}")
    label = doc.get("label")
    # A number or true/false names a label as the Python API's explain(label=1) does: a run
    # trained on a column of 0/1 holds "0" and "1", and a JSON client sends them as numbers.
    if label is not None and not isinstance(label, (str, int, float)):
        raise BadRequest(422, f"label must be a string, a number or true/false, got {_kind(label)}")
    if label is not None and labels:   # a label the run holds in another spelling of its value (1 for 1.0) is the run's
        label = run_label(label, labels)
    if label is not None and not isinstance(label, str):
        label = json.dumps(label)
    if label is not None and labels is not None and label not in labels:
        raise BadRequest(422, f"label {label!r} is not one of this run's labels" if labels
                         else "label: this run is a regression model, it explains its value")
    return texts, {"top": min(top, MAX_TOP) if top is not None else 10, "label": label}


def parse_request(body: bytes, max_batch: int, classifies: bool = True,
                  labels: int | None = None, multilabel: bool = False) -> tuple[list, dict]:
    """A ``/predict`` body → (texts, keyword arguments of ``Predictor.predict``); a
    :class:`BadRequest` (413 for too many texts, else 400/422) saying what is wrong.
    ``top_k`` past the run's number of ``labels`` ranks them all."""
    doc = _json(body)
    texts = _texts(doc, FIELDS, max_batch)
    top_k, threshold = _number(doc, "top_k", int), _number(doc, "threshold", (int, float))
    if top_k is not None and (top_k < 1 or not classifies):
        raise BadRequest(422, f"top_k must be ≥ 1, got {top_k}" if classifies
                         else "top_k ranks labels: this run is a regression model")
    if top_k is not None and labels:
        # The work grows with top_k, not with the labels: top_k 10**9 held the server for good.
        top_k = min(top_k, labels)
    if threshold is not None and not 0.0 < threshold < 1.0:
        raise BadRequest(422, f"threshold must be between 0 and 1, got {threshold}")
    if threshold is not None and not multilabel:
        raise BadRequest(422, "threshold applies to a multilabel run: this run predicts one label a text, its most "
                              "probable")
    # No threshold: the run's own per label (0.5 for a run without them).
    return texts, {"top_k": top_k, "threshold": None if threshold is None else float(threshold)}


async def _next(stream: Any, timeout: float | None) -> bytes | None:
    """The body's next chunk (None at its end); a 408 when none comes within ``timeout`` s."""
    try:
        return await asyncio.wait_for(stream.__anext__(), timeout)
    except StopAsyncIteration:
        return None
    except asyncio.TimeoutError:
        raise BadRequest(408, f"no byte of the body came for {timeout:g} s: send the body whole",
                         {"Connection": "close"}) from None


async def _drop(stream: Any, timeout: float | None, most: int) -> None:
    """Read on and drop up to ``most`` bytes of the body, so its sender reads the answer."""
    try:
        while most > 0 and (chunk := await _next(stream, timeout)) is not None:
            most -= len(chunk)
    except BadRequest:
        pass


async def read_body(request: Any, limit: int, timeout: float | None = None) -> bytes:
    """The request's body: 413 past ``limit`` bytes (never held past it), 408 when
    its bytes stop for ``timeout`` seconds, 400 when the client leaves mid-way."""
    from starlette.requests import ClientDisconnect

    declared = request.headers.get("content-length", "")
    stream = request.stream().__aiter__()
    chunks, size = [], 0
    try:
        if declared.isdigit() and int(declared) > limit:
            if int(declared) <= limit + DRAIN:
                await _drop(stream, timeout, int(declared))
            raise BadRequest(413, f"the body is {int(declared):,} bytes; this server takes at most {limit:,} "
                                  "(send smaller batches, or start it with a larger --max-body)")
        while (chunk := await _next(stream, timeout)) is not None:
            size += len(chunk)
            if size > limit:
                await _drop(stream, timeout, DRAIN)
                raise BadRequest(413, f"the body is over {limit:,} bytes, the most this server takes "
                                      "(send smaller batches, or start it with a larger --max-body)")
            chunks.append(chunk)
    except ClientDisconnect:
        raise BadRequest(400, "the client closed the connection before the body ended") from None
    return b"".join(chunks)


def health(pred: Any, max_batch: int) -> dict:
    """What ``GET /health`` answers once the run is loaded."""
    from ..registry import task_kind

    meta = pred.run.meta
    return {"status": "ready", "run": str(pred.run.url), "model": meta.get("model", meta.get("net")),
            "task": task_kind(meta), "labels": list(pred.labels), "max_batch": max_batch}


def _said(error: BaseException) -> str:
    return error.message if isinstance(error, UserError) else f"{type(error).__name__}: {error}"


class Model:
    """The run behind a server, loaded once, now or in a thread (:meth:`start`):
    :attr:`status` is ``loading``, then ``ready`` (:attr:`pred`, a Predictor) or
    ``failed`` (:attr:`error`). ``run``: a run folder or URL, or a loaded Predictor."""

    def __init__(self, run: Any, storage_options: dict | None = None):
        self.run, self.storage_options = run, storage_options
        self.pred: Any = None
        self.error: BaseException | None = None
        self.seconds: float | None = None
        self._lock, self._then, self._started = threading.Lock(), [], False
        if not isinstance(run, (str, os.PathLike)):
            self.pred, self._started, self.seconds = run, True, 0.0

    @property
    def status(self) -> str:
        return "ready" if self.pred is not None else "failed" if self.error is not None else "loading"

    @property
    def started(self) -> bool:
        return self._started

    def load(self) -> Any:
        """Load the run in this thread and return its Predictor; an error is kept
        (``/health`` says it) and raised."""
        with self._lock:
            if self._started:
                raise RuntimeError("the run is loaded, or being loaded, already")
            self._started = True
        t0 = time.monotonic()
        try:
            from .predict import Predictor   # torch, for a network: after the port opened

            pred = Predictor(os.fspath(self.run), self.storage_options)
            self.seconds = time.monotonic() - t0
            self.pred = pred
            return pred
        except BaseException as exc:
            self.error = exc
            raise
        finally:
            with self._lock:
                then, self._then = self._then, None
            for fn in then:
                fn(self)

    def start(self) -> None:
        """Load in a daemon thread; meanwhile ``/health`` answers ``loading``."""
        def load() -> None:
            try:
                self.load()
            except BaseException:   # kept in self.error: /health says it, the command raises it
                pass

        threading.Thread(target=load, name="lancetnic-flow-load", daemon=True).start()

    def when_done(self, fn: Callable[[Model], Any]) -> None:
        """Call ``fn(self)`` once loaded or failed: at once if it is, else from the loading thread."""
        with self._lock:
            if self._then is not None and self.status == "loading":
                self._then.append(fn)
                return
        fn(self)


class Service:
    """The endpoints of :func:`app`, and the bounds they keep."""

    def __init__(self, model: Model, max_batch: int, max_body: int, max_queue: int, body_timeout: float | None):
        self.model, self.max_batch, self.max_body = model, max_batch, max_body
        self.max_queue, self.body_timeout = max_queue, body_timeout
        self.held = 0                       # requests taken and not yet answered; only the event loop counts
        self.slots = asyncio.Semaphore(SLOTS)
        self.lock = threading.Lock()        # one batch at a time: torch already uses every core for one
        self.about: dict | None = None

    def unready(self) -> BadRequest:
        if self.model.error is not None:
            return BadRequest(503, f"the run failed to load: {_said(self.model.error)}")
        return BadRequest(503, "the run is still loading: GET /health answers 200 once it is ready", RETRY)

    def answer(self, body: bytes, content_type: str) -> bytes:
        """The answer to a ``/predict`` body, as JSON bytes (in a worker thread)."""
        pred = self.model.pred
        try:
            texts, kw = parse_request(body, self.max_batch, pred.classifies, len(pred.labels), pred.multilabel)
        except BadRequest as exc:
            if exc.status == 400 and content_type and "json" not in content_type:
                exc.message += f" (it came as Content-Type: {content_type[:60]})"
            raise
        cut: list = []   # the texts a sequence run read only to its --max-len: counted in the answer
        with self.lock:
            predictions = pred.predict(texts, cut=cut, **kw) if texts else []
        longer = int(cut_rows(cut, 0).sum())
        return json.dumps({"predictions": predictions, **({TRUNCATED: longer} if longer else {})},
                          ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()

    def explained(self, body: bytes, content_type: str) -> bytes:
        """The answer to an ``/explain`` body, as JSON bytes (in a worker thread): a run
        whose network is no sum over terms (a sequence model) is a 422 saying so."""
        pred = self.model.pred
        try:
            pred.decomposition()
        except UserError as exc:
            raise BadRequest(422, exc.message + (f" ({exc.hint})" if exc.hint else "")) from None
        texts, kw = parse_explain(body, self.max_batch, list(pred.labels) if pred.classifies else [])
        with self.lock:
            explanations = pred.explain(texts, **kw)
        return json.dumps({"explanations": explanations}, ensure_ascii=False, allow_nan=False,
                          separators=(",", ":")).encode()

    async def explain(self, request: Any) -> Any:
        return await self.predict(request, self.explained)

    async def predict(self, request: Any, answer: Callable | None = None) -> Any:
        from starlette.concurrency import run_in_threadpool
        from starlette.responses import Response

        if self.model.pred is None:
            raise self.unready()
        if self.held >= self.max_queue:
            raise BadRequest(503, f"busy: {counted(self.held, 'request')} {verb(self.held, 'is', 'are')} being answered or "
                                  "waiting, the most this server "
                                  "holds (--max-queue); retry", RETRY)
        self.held += 1
        try:
            # Waiting for a slot before reading: a queued request holds no body, only its connection.
            async with self.slots:
                body = await read_body(request, self.max_body, self.body_timeout)
                content = await run_in_threadpool(answer or self.answer, body,
                                                  request.headers.get("content-type", ""))
        finally:
            self.held -= 1
        return Response(content, media_type="application/json")

    async def health(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        model = self.model
        if model.pred is not None:
            self.about = self.about or health(model.pred, self.max_batch)
            return JSONResponse({**self.about, "queued": self.held, "max_queue": self.max_queue})
        doc = {"status": model.status, "run": str(model.run)}
        if model.error is not None:
            return JSONResponse({**doc, "error": _said(model.error)}, status_code=503)
        return JSONResponse(doc, status_code=503, headers=RETRY)


async def _refused(request: Any, exc: BadRequest) -> Any:
    from starlette.responses import JSONResponse

    return JSONResponse({"error": exc.message}, status_code=exc.status, headers=exc.headers)


async def _http_error(request: Any, exc: Any) -> Any:
    from starlette.responses import JSONResponse

    return JSONResponse({"error": f"{exc.detail}: {request.method} {request.url.path} "
                                  "(POST /predict, POST /explain, GET /health)"},
                        status_code=exc.status_code, headers=exc.headers)


async def _crashed(request: Any, exc: Exception) -> Any:
    from starlette.responses import JSONResponse

    # A bug, not the request: the client gets JSON, the server's log the traceback.
    return JSONResponse({"error": f"internal error ({type(exc).__name__}); the server's log has the traceback"},
                        status_code=500)


def app(run: Any, storage_options: dict | None = None, max_batch: int = MAX_BATCH, max_body: int = MAX_BODY,
        max_queue: int = MAX_QUEUE, body_timeout: float | None = BODY_TIMEOUT, wait: bool | None = True):
    """The Starlette app serving ``run`` (a run folder, a loaded :class:`~.predict.Predictor`,
    or a :class:`Model`); run it with any ASGI server, e.g. ``uvicorn.run(app("runs/x"), port=8000)``.
    ``wait``: load the run before returning (an error is raised here); ``wait=False`` loads it
    in a thread, ``/health`` answering 503 ``loading`` until it is ready; ``wait=None`` (a
    :class:`Model` passed to :func:`serve`) leaves the load to start once the server answers."""
    require_serve()
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.routing import Route

    model = run if isinstance(run, Model) else Model(run, storage_options)
    if not model.started and wait is not None:
        model.load() if wait else model.start()
    service = Service(model, max_batch, max_body, max_queue, body_timeout)
    routes = [Route("/predict", service.predict, methods=["POST"]),
              Route("/explain", service.explain, methods=["POST"]),
              Route("/health", service.health, methods=["GET"])]
    app = Starlette(routes=routes, exception_handlers={BadRequest: _refused, HTTPException: _http_error,
                                                       Exception: _crashed})
    app.router.redirect_slashes = False   # "/predict/" is another path (404 in JSON), not a 307 to "/predict"
    return app


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (0: any free port) and listening, or a
    UserError saying why not. Connections made before the server runs wait in its backlog."""
    sock = None
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)   # uvicorn's backlog
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


def serve(application: Any, sock: socket.socket, log_level: str = "info", model: Model | None = None,
          max_connections: int = MAX_CONNECTIONS, head_timeout: float = BODY_TIMEOUT) -> None:
    """Run ``application`` with uvicorn on the bound ``sock``; return once Ctrl-C or
    SIGTERM has stopped it gracefully (answers in flight are sent first), or once
    ``model`` has failed to load (its ``error`` says why; a ``model`` not yet loading starts
    once the server accepts connections). At most ``max_connections``
    connections are served at once, and a request head must come whole within
    ``head_timeout`` seconds (http_protocol.py)."""
    import uvicorn

    from .http_protocol import protocol

    config = uvicorn.Config(application, log_level=log_level, lifespan="off", log_config=log_config(),
                            http=protocol(max_connections, head_timeout))
    server = uvicorn.Server(config)
    if model is not None:
        model.when_done(lambda m: m.error is not None and setattr(server, "should_exit", True))
    if model is not None and not model.started:
        # Loaded once the server accepts: a request made as soon as the "serving" line is
        # printed waits in the backlog and is answered "loading", even when the run's damage
        # is found at once (the load started before uvicorn could end the server unanswered).
        startup = server.startup

        async def accepting_then_load(sockets: list | None = None) -> None:
            await startup(sockets=sockets)
            if not server.should_exit:
                model.start()

        server.startup = accepting_then_load
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


def log_config() -> dict:
    """uvicorn's logging with its access log on stderr, as its other lines and every human
    line of the command are: its own config writes the access log to stdout, where
    ``--json-log`` writes its events and nothing else, so a reader of them met request lines."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["handlers"]["access"]["stream"] = "ext://sys.stderr"
    return config


__all__ = ["app", "serve", "log_config", "listen", "parse_request", "parse_explain", "read_body",
           "health", "require_serve", "BadRequest", "Model",
           "MAX_BATCH", "MAX_BODY", "MAX_QUEUE", "BODY_TIMEOUT", "MAX_CONNECTIONS", "SLOTS"]
