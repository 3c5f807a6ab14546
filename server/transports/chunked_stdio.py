"""Serve a FastMCP app over stdin/stdout with chunked framing (`--transport chunked-stdio`).

Everything but the line format is mcp's own stdio server: `mcp.server.stdio.stdio_server`
accepts the stdin to iterate and the stdout to write, so we hand it a reader that yields whole
messages out of the `Reassembler` and a writer that turns each outgoing JSON line into frames.
Its memory streams, tasks and error handling stay the SDK's. Like the SDK we first claim fd 0
and fd 1 (fd 1 then points at stderr), so a stray `print()` in a tool or library lands in the
log instead of inside a frame. Logs go to stderr only; stdout carries nothing but the wire.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, BinaryIO, Literal, TextIO, cast

import anyio
from fastmcp import FastMCP
from fastmcp.server.context import reset_transport, set_transport
from mcp.server.stdio import _claim_fd, _open_stdin_diversion, _open_stdout_diversion, stdio_server
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage

from server.transports.framing import FramingOptions, Reassembler


class _MessageReader:
    """What `stdio_server` iterates as its stdin: whole JSON messages, one per step."""

    def __init__(self, wire: anyio.AsyncFile[bytes], reassembler: Reassembler) -> None:
        self._wire = wire
        self._reassembler = reassembler

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for line in self._wire:
            message = self._reassembler.feed(line)
            if message is not None:
                yield message


class _FrameWriter:
    """What `stdio_server` writes to as its stdout: each `json + "\\n"` leaves as frames."""

    def __init__(self, wire: anyio.AsyncFile[bytes], framing: FramingOptions) -> None:
        self._wire = wire
        self._framing = framing

    async def write(self, line: str) -> None:
        # One write per message: its frames go out back to back in a single thread hop.
        await self._wire.write(self._framing.encode(line))

    async def flush(self) -> None:
        await self._wire.flush()


@asynccontextmanager
async def chunked_stdio_server(
    framing: FramingOptions | None = None,
) -> AsyncIterator[tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]]:
    """Yield the (read, write) stream pair of a chunked connection on fds 0 and 1, as
    `stdio_server` does for plain stdio; the fds are claimed until the context exits."""
    framing = framing or FramingOptions()
    async with AsyncExitStack() as stack:
        stdin = _claim(stack, 0, sys.stdin, "rb", _open_stdin_diversion)
        stdout = _claim(stack, 1, sys.stdout, "wb", _open_stdout_diversion)
        # stdio_server only iterates its stdin and calls write/flush on its stdout.
        reader = cast("anyio.AsyncFile[str]", _MessageReader(anyio.wrap_file(stdin), Reassembler(framing)))
        writer = cast("anyio.AsyncFile[str]", _FrameWriter(anyio.wrap_file(stdout), framing))
        async with stdio_server(stdin=reader, stdout=writer) as streams:
            yield streams


def _claim(
    stack: AsyncExitStack, fd: int, stream: TextIO, mode: Literal["rb", "wb"], diversion: Callable[[], int]
) -> BinaryIO:
    """Take fd `fd` for the wire through the SDK's claim, released when `stack` closes."""
    wire, release = _claim_fd(fd, stream, mode, diversion)
    if release is not None:
        stack.callback(release)
    return wire


async def run_chunked_stdio(app: FastMCP[Any], framing: FramingOptions | None = None) -> None:
    """Serve `app` over this process's stdin/stdout with chunked framing until stdin closes.

    The same steps as `FastMCP.run_stdio_async` (transport marked "stdio", lifespan entered
    once, one connection served) with the chunked streams instead of the plain ones. From
    sync code: `anyio.run(run_chunked_stdio, app, FramingOptions(chunk_limit=...))`.
    """
    token = set_transport("stdio")
    try:
        async with app._lifespan_manager():
            async with chunked_stdio_server(framing) as (read_stream, write_stream):
                lowlevel = app._mcp_server
                await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
    finally:
        reset_transport(token)
