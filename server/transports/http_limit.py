"""A request size cap on streamable HTTP that answers in JSON-RPC (`server.max_request_bytes`).

The MCP SDK already refuses bodies over 4 MiB, but with a plain-text 413 a JSON-RPC client
cannot show, and at a size nobody can configure. This ASGI middleware sits in front of it: a
POST whose Content-Length is over the limit is answered at once without reading the body; one
without a Content-Length (chunked transfer) is read up to the limit and answered as soon as it
passes it, so at most `limit` bytes are ever held. The answer is HTTP 413 with a JSON-RPC error
body (-32600, null id: the body was not read) saying the limit and what to do, the same text
stdio clients get. The SDK's own cap still applies inside, so a limit above 4 MiB has effect
on stdio only.
"""

from __future__ import annotations

import json

import mcp_types as types
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.transports.checked_stdio import too_large_text


class RequestSizeLimit:
    def __init__(self, app: ASGIApp, max_request_bytes: int) -> None:
        self.app = app
        self.limit = max_request_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit():
            if int(declared) > self.limit:
                await self._refuse(int(declared), send)
            else:
                await self.app(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away mid-body
            body += message.get("body", b"")
            if len(body) > self.limit:
                await self._refuse(len(body), send)
                return
            if not message.get("more_body", False):
                break
        replayed: list[Message] = [{"type": "http.request", "body": bytes(body), "more_body": False}]

        async def replay() -> Message:
            return replayed.pop() if replayed else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, size: int, send: Send) -> None:
        error = {"code": types.INVALID_REQUEST, "message": too_large_text(size, self.limit)}
        body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})
