"""Bounds on an HTTP request body: its size (`server.max_request_bytes`) and how long it may stall
(`server.request_timeout_s`), both answered in JSON-RPC.

The MCP SDK already refuses bodies over 4 MiB, but with a plain-text 413 a JSON-RPC client
cannot show, and at a size nobody can configure; and neither it nor uvicorn limits how long a
client may take to send a body, so a client that stops mid-body holds its buffer for as long as
it keeps the connection open. This ASGI middleware sits in front of the SDK and reads every POST
body itself before handing it on:

- a Content-Length over the limit is answered 413 at once, without reading the body; a body
  without one (chunked transfer) is read up to the limit and answered as soon as it passes it,
  so at most `limit` bytes are ever held;
- a body that sends nothing for `body_timeout_s` (`server.request_timeout_s`; idle time, not age: a large body arriving
  slowly but steadily is not cut off) is answered 408 and its connection closed;
- a body that is not declared JSON (`Content-Type: application/json`) is answered 415 on the
  headers: the SDK refused it with a plain-text "Invalid Content-Type header" a JSON-RPC client
  cannot show, and that did not say what was expected;
- all bodies still arriving hold at most `framing.DEFAULT_MAX_BUFFERED_BYTES` together: a piece that
  would pass it gets its request a 503, so many clients each keeping a body just under the size
  limit open (a byte now and then beats the idle timeout) cannot add up to unbounded memory.

It runs after the Host/Origin guard and the bearer-token check (server/transports/run.py), so
nothing here is spent on a request that would be refused anyway. The SDK's own cap still
applies inside, so a limit above 4 MiB has effect on stdio only.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.transports.checked_stdio import too_large_text
from server.transports.http_errors import refuse


class RequestBodyLimits:
    """`idle_timer(seconds)` is the cancel scope each wait for a body piece runs in (anyio's
    `move_on_after`); tests pass scopes they expire themselves, so idle-versus-age is asserted
    without waiting out real time."""

    def __init__(
        self,
        app: ASGIApp,
        max_request_bytes: int,
        body_timeout_s: float,
        max_buffered_bytes: int,
        *,
        idle_timer: Callable[[float], anyio.CancelScope] = anyio.move_on_after,
    ) -> None:
        self.app = app
        self.limit = max_request_bytes
        self.timeout_s = body_timeout_s
        self.max_buffered = max_buffered_bytes
        self.idle_timer = idle_timer
        self.buffered = 0  # bytes of the bodies being read now, all connections together

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if not headers.get("content-type", "").lower().startswith("application/json"):  # the SDK's own test
            await refuse(send, 415, _media_type_text(headers.get("content-type")))
            return
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await refuse(send, 413, too_large_text(int(declared), self.limit))
            return
        body = await self._read_body(receive, send)
        if body is None:
            return
        replayed: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

        async def replay() -> Message:
            return replayed.pop() if replayed else await receive()

        await self.app(scope, replay, send)

    async def _read_body(self, receive: Receive, send: Send) -> bytes | None:
        """The whole body, or None once the request was answered (or the client went away)."""
        body = bytearray()
        try:
            return await self._read_into(body, receive, send)
        finally:
            self.buffered -= len(body)

    async def _read_into(self, body: bytearray, receive: Receive, send: Send) -> bytes | None:
        while True:
            with self.idle_timer(self.timeout_s) as idle:
                message = await receive()
            if idle.cancelled_caught:
                await refuse(send, 408, self._stalled_text(len(body)))
                return None
            if message["type"] != "http.request":
                return None  # the client went away mid-body
            piece = message.get("body", b"")
            if self.buffered + len(piece) > self.max_buffered:
                await refuse(send, 503, self._busy_text())
                return None
            body += piece
            self.buffered += len(piece)
            if len(body) > self.limit:
                await refuse(send, 413, too_large_text(len(body), self.limit))
                return None
            if not message.get("more_body", False):
                return bytes(body)

    def _busy_text(self) -> str:
        return (
            f"Server busy: request bodies still arriving already hold {self.buffered} bytes, near this server's "
            f"limit of {self.max_buffered} bytes for all of them together, so this request was dropped. Retry "
            "in a moment."
        )

    def _stalled_text(self, received: int) -> str:
        return (
            f"Invalid Request: the request body stopped arriving ({received} bytes received, then nothing for "
            f"{self.timeout_s:g} s, this server's server.request_timeout_s), so the request was dropped. "
            "Send the whole body without pausing, or raise server.request_timeout_s in the server's settings."
        )


def _media_type_text(given: str | None) -> str:
    shown = "none" if given is None else repr(given[:100])
    return (
        f"Invalid Request: the request body's Content-Type is {shown}; this server reads JSON-RPC only. "
        "Send the header `Content-Type: application/json` with every POST."
    )
