"""Plain stdio (`--transport stdio`, the default) that answers malformed input instead of
dropping it.

The SDK's stdio server skips a line that is not a valid JSON-RPC message: it logs it and reads
on. A client whose request was malformed (a lone surrogate in a string, a missing field, a
batch) then waits for an answer that never comes. JSON-RPC 2.0 says such input gets an error
response: -32700 when the line is not JSON, -32600 when it is JSON but not a valid message. The
answer carries the request's id whenever one can be read, so the client stops waiting; else
null. Everything else is the SDK's `stdio_server`, fed through a line filter, exactly as the
chunked transport feeds it frames.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, cast

import anyio
import mcp_types as types
from fastmcp import FastMCP
from fastmcp.server.context import reset_transport, set_transport
from mcp.server.stdio import _open_stdin_diversion, _UnownedTextWrapper, stdio_server
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from server.transports.chunked_stdio import _claim

_MAX_DETAIL = 200


class _CheckedLines:
    """What `stdio_server` iterates as its stdin: only lines that are valid messages. Others
    are answered through `reply` (the connection's write stream, set once it exists)."""

    def __init__(self, wire: anyio.AsyncFile[str]) -> None:
        self._wire = wire
        self._ready = anyio.Event()
        self._write: WriteStream[SessionMessage] | None = None

    def attach(self, write_stream: WriteStream[SessionMessage]) -> None:
        self._write = write_stream
        self._ready.set()

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self._wire:
            if not line.strip():
                continue
            try:
                message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                error = _unusable_id(line) if isinstance(message, types.JSONRPCNotification) else None
            except ValidationError as exc:
                error = refusal(line, exc)
            if error is None:
                yield line
                continue
            await self._ready.wait()
            assert self._write is not None
            await self._write.send(SessionMessage(error))


def refusal(line: str, exc: ValidationError) -> types.JSONRPCError:
    """The JSON-RPC error answering `line`, which failed validation with `exc`."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return _error(None, types.PARSE_ERROR, "Parse error: the line is not JSON; send one JSON-RPC message per line")
    request_id = message.get("id") if isinstance(message, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, (int, str)) or not _encodable(request_id):
        request_id = None
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "message"
    detail = _safe(f"{where}: {first['msg']}")[:_MAX_DETAIL]
    kind = "a batch (arrays are not supported)" if isinstance(message, list) else "not a valid JSON-RPC 2.0 message"
    return _error(request_id, types.INVALID_REQUEST, f"Invalid Request: {kind} ({detail})")


def _unusable_id(line: str) -> types.JSONRPCError | None:
    """A request whose id is neither a string nor an integer parses as a notification (the SDK
    ignores the id) and would never be answered: refuse it instead."""
    if '"id"' not in line or "id" not in json.loads(line):
        return None
    return _error(None, types.INVALID_REQUEST, "Invalid Request: id must be a string or an integer")


def _error(request_id: int | str | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


def _encodable(value: object) -> bool:
    return not isinstance(value, str) or _safe(value) == value


def _safe(text: str) -> str:
    """Lone surrogates (valid in JSON escapes, not in UTF-8) shown as escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@asynccontextmanager
async def checked_stdio_server() -> AsyncIterator[
    tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]
]:
    """`stdio_server` on fds 0 and 1 with the malformed-line filter in front of it."""
    async with AsyncExitStack() as stack:
        stdin = _claim(stack, 0, sys.stdin, "rb", _open_stdin_diversion)
        lines = _CheckedLines(anyio.wrap_file(_UnownedTextWrapper(stdin, encoding="utf-8", errors="replace")))
        async with stdio_server(stdin=cast("anyio.AsyncFile[str]", lines)) as (read_stream, write_stream):
            lines.attach(write_stream)
            yield read_stream, write_stream


async def run_checked_stdio(app: FastMCP[Any]) -> None:
    """Serve `app` on this process's stdin/stdout until stdin closes (what
    `FastMCP.run_stdio_async` does, with the checked line reader)."""
    token = set_transport("stdio")
    try:
        async with app._lifespan_manager():
            async with checked_stdio_server() as (read_stream, write_stream):
                lowlevel = app._mcp_server
                await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
    finally:
        reset_transport(token)
