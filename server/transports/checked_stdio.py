"""Plain stdio (`--transport stdio`, the default) that answers malformed input instead of
dropping it, and refuses requests over the size limit without holding them.

The SDK's stdio server skips a line that is not a valid JSON-RPC message: it logs it and reads
on. A client whose request was malformed (a lone surrogate in a string, a missing field, a
batch) then waits for an answer that never comes. JSON-RPC 2.0 says such input gets an error
response: -32700 when the line is not JSON, -32600 when it is JSON but not a valid message. The
answer carries the request's id whenever one can be read, so the client stops waiting; else
null. A request over `server.max_request_bytes` gets -32600 too, its id read from its first
bytes; the line is discarded as it streams (`wire.LineSplitter`), so a 1 GB line costs no more
memory than the limit. Everything else is the SDK's `stdio_server`, fed through
`CheckedMessages`; the chunked transport feeds it the same way, with reassembly in between.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import BinaryIO, cast

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from server.sdk_shim import ReadStream, WriteStream, claim_stdin, claim_stdout
from server.transports import pipe_io
from server.transports.wire import READ_SIZE, Refused, TooLarge, bounded_lines, leading_fields, printable, reply_id

logger = logging.getLogger(__name__)

_MAX_DETAIL = 200


class CheckedMessages:
    """What `stdio_server` iterates as its stdin: only messages that are valid JSON-RPC. Others,
    and `TooLarge` and `Refused` refusals, are answered through the connection's write stream
    (`attach`)."""

    def __init__(self, messages: AsyncIterable[bytes | TooLarge | Refused]) -> None:
        self._messages = messages
        self._ready = anyio.Event()
        self._write: WriteStream[SessionMessage] | None = None

    def attach(self, write_stream: WriteStream[SessionMessage]) -> None:
        self._write = write_stream
        self._ready.set()

    async def __aiter__(self) -> AsyncIterator[str]:
        async for message in self._messages:
            if isinstance(message, TooLarge):
                logger.warning("refused a request of at least %d bytes (limit %d)", message.size, message.limit)
                error: types.JSONRPCError = too_large(message)
            elif isinstance(message, Refused):  # the reassembler has logged why
                error = refused(message)
            else:
                line = message.decode("utf-8", "replace")
                if not line.strip():
                    continue
                checked = check(line)
                if checked is None:
                    yield line
                    continue
                error = checked
            await self._ready.wait()
            assert self._write is not None
            await self._write.send(SessionMessage(error))


def check(line: str) -> types.JSONRPCError | None:
    """The JSON-RPC error answering `line`, or None when it is a message the SDK will handle."""
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError as exc:
        return refusal(line, exc)
    return _unusable_id(line) if isinstance(message, types.JSONRPCNotification) else None


def too_large(request: TooLarge) -> types.JSONRPCError:
    """The -32600 answering a request refused for its size, with its id if its head shows it."""
    return _error(_head_id(request.head), types.INVALID_REQUEST, too_large_text(request.size, request.limit))


def refused(request: Refused) -> types.JSONRPCError:
    """The -32600 answering a framed request dropped for a reassembly limit, with its id if known."""
    return _error(_head_id(request.head), types.INVALID_REQUEST, f"Invalid Request: {request.reason}")


def _head_id(head: bytes) -> int | str | None:
    """The id a refused request's first bytes show, if a reply can carry it."""
    return reply_id(leading_fields(head).get("id"))


def too_large_text(size: int, limit: int) -> str:
    """What a client is told about an oversized request, on every transport."""
    return (
        f"Invalid Request: the request is at least {size} bytes, over this server's limit of {limit} bytes "
        "(server.max_request_bytes). Send a smaller request (e.g. a shorter pattern or fewer arguments), "
        "or raise server.max_request_bytes in the server's settings."
    )


def refusal(line: str, exc: ValidationError) -> types.JSONRPCError:
    """The JSON-RPC error answering `line`, which failed validation with `exc`."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return _error(None, types.PARSE_ERROR, "Parse error: the line is not JSON; send one JSON-RPC message per line")
    request_id = reply_id(message.get("id") if isinstance(message, dict) else None)
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "message"
    detail = printable(f"{where}: {first['msg']}")[:_MAX_DETAIL]
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


def read_chunks(wire: BinaryIO) -> AsyncIterator[bytes]:
    """What arrives on `wire`, as it arrives: read by the event loop on a pipe or a socket, else
    with a thread hop per read, as the SDK's reader does (`server.transports.pipe_io`)."""
    return pipe_io.read_chunks(wire, READ_SIZE)


class LineWriter:
    """What `stdio_server` writes to as its stdout. The SDK calls `write` then `flush` for every
    message, and its own stdout makes each a thread hop; here the line is held until the flush,
    which sends it whole through a `WireWriter` (on a pipe, by the event loop: no hop at all)."""

    def __init__(self, wire: pipe_io.WireWriter) -> None:
        self._wire = wire
        self._pending: list[bytes] = []

    async def write(self, line: str) -> None:
        self._pending.append(line.encode("utf-8"))

    async def flush(self) -> None:
        data = b"".join(self._pending)
        self._pending.clear()
        await self._wire.send(data)


@asynccontextmanager
async def checked_stdio_server(
    max_request_bytes: int,
) -> AsyncIterator[tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]]:
    """`stdio_server` on fds 0 and 1 with the size-bounded, malformed-line filter in front of it.
    Both fds are claimed as the SDK claims them (fd 1 then points at stderr, so a stray `print()`
    lands in the log, not inside a message), until the context exits."""
    async with AsyncExitStack() as stack:
        stdin = claim_stdin(stack)
        wire = pipe_io.WireWriter(claim_stdout(stack))
        stack.callback(wire.close)
        messages = CheckedMessages(bounded_lines(read_chunks(stdin), max_request_bytes))
        # stdio_server only iterates its stdin and calls write/flush on its stdout.
        stdout = cast("anyio.AsyncFile[str]", LineWriter(wire))
        async with stdio_server(stdin=cast("anyio.AsyncFile[str]", messages), stdout=stdout) as (
            read_stream,
            write_stream,
        ):
            messages.attach(write_stream)
            yield read_stream, write_stream
