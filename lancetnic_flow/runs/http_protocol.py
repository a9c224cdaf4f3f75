"""The HTTP/1.1 connections under ``serve``: bounded, and refused in JSON.

uvicorn answers a request its parser refuses (a malformed request line or
header, no Host, a bad Content-Length or chunk size, a head over 16 KiB)
itself, with a plain-text page the app never sees; it holds any number of
connections, and a client that sends its request head a byte at a time, or
nothing at all, keeps its connection for good. :func:`protocol` gives
uvicorn's h11 protocol (whichever parser uvicorn would pick: httptools,
when installed, refuses in its own words) with three changes:

- a request the parser refuses is a 4xx with ``{"error": ...}`` naming
  what the parser found, like every other refusal of the server;
- past ``max_connections`` open connections a new one is answered 503
  with ``Retry-After`` once its request head has come, and closed;
- a connection whose request head has not come whole ``head_timeout``
  seconds after its first byte (or after it opened) is answered 408 and
  closed, so a slow or silent client cannot keep a place for good.
"""
from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


class _Connection(h11.Connection):
    """h11's connection, keeping the error the client's bytes made (uvicorn drops it)."""

    error: h11.RemoteProtocolError | None = None

    def __init__(self, *args: Any, max_incomplete_event_size: int = 16 * 1024, **kwargs: Any):
        super().__init__(*args, max_incomplete_event_size=max_incomplete_event_size, **kwargs)
        self.max_head = max_incomplete_event_size

    def next_event(self) -> Any:
        try:
            event = super().next_event()
            # h11 bounds a head only while it is incomplete: one that arrives whole in a read is parsed
            # whatever its size, so the bound is checked again on the head it gives.
            if isinstance(event, h11.Request) and _head_size(event) > self.max_head:
                raise h11.RemoteProtocolError(f"the request head is over {self.max_head // 1024} KiB",
                                              error_status_hint=431)
            return event
        except h11.RemoteProtocolError as exc:
            self.error = exc
            raise


def _head_size(request: h11.Request) -> int:
    """The bytes of ``request``'s head as sent, less the spaces a header line may pad."""
    line = len(request.method) + len(request.target) + len(b" HTTP/1.1\r\n") + 1
    return line + sum(len(name) + len(value) + 4 for name, value in request.headers) + 2


class Protocol(H11Protocol):
    """uvicorn's h11 protocol, bounded and answering its refusals in JSON (module doc)."""

    max_connections = 1000
    head_timeout = 30.0

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        size = self.config.h11_max_incomplete_event_size
        self.conn = _Connection(h11.SERVER, **({} if size is None else {"max_incomplete_event_size": size}))
        self.over = False
        self.head_timer: Any = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self.over = len(self.connections) > self.max_connections
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.over:
            self._refuse_over(data)
            return
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()              # a whole head came: the body has --body-timeout of its own
        elif self.head_timer is None:
            self._arm()                 # from the first byte of the next head, never pushed back

    def _refuse_over(self, data: bytes) -> None:
        # Answered once the head has come, so the client is reading when the answer comes.
        self.conn.receive_data(data)
        try:
            event = self.conn.next_event()
        except h11.RemoteProtocolError:
            self.send_400_response("")
            return
        if isinstance(event, h11.Request):
            self.refuse(503, f"busy: {len(self.connections) - 1} connections are open, the most this server "
                             "holds (--max-connections); retry", {"Retry-After": "1"})

    def send_400_response(self, msg: str) -> None:
        exc = self.conn.error
        hint = getattr(exc, "error_status_hint", 400)
        why = str(exc) if exc is not None and str(exc) else msg.rstrip(".")
        self.refuse(hint if 400 <= hint < 500 else 400,
                    f"not a valid HTTP request ({why}): send POST /predict with a JSON body, or GET /health")

    def _arm(self) -> None:
        self._disarm()
        self.head_timer = self.loop.call_later(self.head_timeout, self._head_late)

    def _disarm(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_late(self) -> None:
        self.head_timer = None
        if self.conn.their_state is h11.IDLE:
            self.refuse(408, f"no whole request head came within {self.head_timeout:g} s: send the request whole")

    def refuse(self, status: int, message: str, headers: dict | None = None) -> None:
        """Answer ``status`` with ``{"error": message}`` and close the connection."""
        if self.transport.is_closing():
            return
        if self.cycle is None or not self.cycle.response_started:
            # Written as bytes, not through h11, whose state may not allow a response here.
            body = json.dumps({"error": message}, ensure_ascii=False).encode()
            head = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", "content-type: application/json",
                    f"content-length: {len(body)}", "connection: close",
                    *(f"{k}: {v}" for k, v in (headers or {}).items())]
            self.transport.write("\r\n".join(head).encode() + b"\r\n\r\n" + body)
        self.transport.close()


def protocol(max_connections: int, head_timeout: float) -> type[Protocol]:
    """The :class:`Protocol` for ``uvicorn.Config(http=...)`` with these bounds."""
    return type("Protocol", (Protocol,), {"max_connections": max_connections, "head_timeout": head_timeout})


__all__ = ["Protocol", "protocol"]
