"""A deadline for a request's head (request line and headers) on the HTTP transport.

The Host/Origin guard, the token check and the body limits (http_limit.py) all run on a
complete head; until then the request belongs to uvicorn, which has no timeout for it (its
keep-alive timeout only covers the pause between requests, and any byte cancels it). A client
that connects and sends nothing, or a header byte now and then, kept its connection and file
descriptor for as long as it liked, without a token: enough of them and the server accepts
no one. This uvicorn protocol closes a connection whose head is not complete within
`server.request_timeout_s` of its start (the connection's opening, or the head's first byte on a
kept-alive connection, whose idle time between requests uvicorn's keep-alive timeout bounds),
after a 408 with a JSON-RPC error saying so. A deadline, not an idle timer: a head is a few
hundred bytes, and a client sending it a byte at a time must not keep it open.

It subclasses uvicorn's h11 protocol (uvicorn's documented `http` setting takes a protocol
class) and reads its `conn`, `loop` and `transport`, which uvicorn does not document: a
uvicorn release that changes them fails
`tests/test_http_auth.py::test_connections_that_never_finish_their_headers_are_closed_after_the_body_timeout`.
"""

from __future__ import annotations

import asyncio
import functools

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from server.transports.http_errors import error_body


class HeadDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol, plus the deadline; build it with `head_deadline_protocol`."""

    def __init__(self, *args: object, deadline_s: float, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.deadline_s = deadline_s
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._deadline is None and self.conn.their_state is h11.IDLE:
            self._arm()  # the first byte of a head after a response
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # the head is in (or the connection is done)
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE and self.conn.trailing_data[0]:
            self._arm()  # part of a pipelined head was already here

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.deadline_s, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        body = error_body(
            f"Invalid Request: the request's headers did not all arrive within {self.deadline_s:g} s "
            "(this server's server.request_timeout_s), so the connection was closed. Send the request line "
            "and headers at once."
        )
        head = (
            "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        )
        self.transport.write(head.encode() + body)
        self.transport.close()


def head_deadline_protocol(deadline_s: float) -> type[asyncio.Protocol]:
    """The protocol class for uvicorn's `http` setting, with this deadline."""
    return functools.partial(HeadDeadlineProtocol, deadline_s=deadline_s)  # type: ignore[return-value]
