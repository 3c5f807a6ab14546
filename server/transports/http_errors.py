"""The one shape every refusal on the HTTP transport takes, before a request reaches MCP.

A JSON-RPC client can show a JSON-RPC error but not a plain-text status page, so the Host/Origin
guard (403), the bearer-token check (401), the size cap (413) and the body timeout (408) all
answer with `{"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": ...}}`: the id
is null because the body was not read (or not trusted). The message says what to change.

Every refusal closes the connection (`Connection: close`): the request's body may still be
arriving, unread, and the server must neither buffer it nor parse it as the next request.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import mcp_types as types
from starlette.types import Send


async def refuse(send: Send, status: int, message: str, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    """Answer `status` with a JSON-RPC -32600 error saying `message`, and close the connection."""
    body = error_body(message)
    start = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *headers,
    ]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": body})


def error_body(message: str) -> bytes:
    """The JSON-RPC -32600 error (id null) saying `message`, as the bytes of a response body."""
    error = {"code": types.INVALID_REQUEST, "message": message}
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
