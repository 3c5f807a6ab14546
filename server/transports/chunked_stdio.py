"""Serve a FastMCP app over stdin/stdout with chunked framing (`--transport chunked-stdio`).

Everything but the line format is plain checked stdio (`checked_stdio`): the SDK's
`stdio_server` iterates a `CheckedMessages` (so malformed or oversized requests get the same
JSON-RPC errors as on plain stdio), fed here by the `Reassembler` instead of straight from the
lines, and writes to a writer that turns each outgoing JSON line into frames. Its memory
streams, tasks and error handling stay the SDK's. Like the SDK we first claim fd 0 and fd 1
(fd 1 then points at stderr), so a stray `print()` in a tool or library lands in the log
instead of inside a frame. Logs go to stderr only; stdout carries nothing but the wire.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import cast

import anyio
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from server.sdk_shim import ReadStream, WriteStream, claim_stdin, claim_stdout
from server.transports.checked_stdio import CheckedMessages, read_chunks
from server.transports.framing import FramingOptions, Reassembler
from server.transports.pipe_io import WireWriter
from server.transports.wire import Refused, TooLarge, bounded_lines


async def reassembled(
    chunks: AsyncIterable[bytes], reassembler: Reassembler, max_line_bytes: int
) -> AsyncIterator[bytes | TooLarge | Refused]:
    """The whole messages (or refusals) carried by a stream of plain lines and frames."""
    async for line in bounded_lines(chunks, max_line_bytes):
        message = reassembler.feed(line)
        if message is not None:
            yield message


async def expire_idle_messages(reassembler: Reassembler) -> None:
    """Drop incomplete messages on time even when no line arrives (until cancelled)."""
    while True:
        await anyio.sleep(reassembler.expire())


class _FrameWriter:
    """What `stdio_server` writes to as its stdout: each `json + "\\n"` leaves as frames.

    The SDK calls `write` then `flush` for every message; the frames are held until the flush,
    which sends them whole through a `WireWriter`: on a pipe, written by the event loop; else
    written and flushed in one thread hop instead of two, so a flood of small answers (one per
    malformed line) costs half the hops."""

    def __init__(self, wire: WireWriter, framing: FramingOptions) -> None:
        self._wire = wire
        self._framing = framing
        self._pending: list[bytes] = []

    async def write(self, line: str) -> None:
        self._pending.append(self._framing.encode(line))

    async def flush(self) -> None:
        data = b"".join(self._pending)
        self._pending.clear()
        await self._wire.send(data)


@asynccontextmanager
async def chunked_stdio_server(
    framing: FramingOptions,
) -> AsyncIterator[tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]]:
    """Yield the (read, write) stream pair of a chunked connection on fds 0 and 1, as
    `stdio_server` does for plain stdio; the fds are claimed until the context exits.
    `framing.max_message_bytes` is the request size limit."""
    reassembler = Reassembler(framing)
    async with AsyncExitStack() as stack:
        stdin = claim_stdin(stack)
        stdout = WireWriter(claim_stdout(stack))
        stack.callback(stdout.close)
        messages = CheckedMessages(reassembled(read_chunks(stdin), reassembler, framing.max_line_bytes))
        # stdio_server only iterates its stdin and calls write/flush on its stdout.
        writer = cast("anyio.AsyncFile[str]", _FrameWriter(stdout, framing))
        async with anyio.create_task_group() as tg:
            tg.start_soon(expire_idle_messages, reassembler)
            try:
                async with stdio_server(stdin=cast("anyio.AsyncFile[str]", messages), stdout=writer) as streams:
                    messages.attach(streams[1])
                    yield streams
            finally:
                tg.cancel_scope.cancel()
