"""Client side of chunked stdio: spawn a server command and speak the framing with it.

Two layers, for two kinds of Python client:

- `chunked_stdio_client(params)` is a drop-in for `mcp.client.stdio.stdio_client`: it yields
  the same `(read_stream, write_stream)` pair, so any code built on `mcp.ClientSession` uses
  it unchanged::

      async with chunked_stdio_client(StdioServerParameters(command="codepager",
              args=["serve", "--transport", "chunked-stdio"])) as (read, write):
          async with ClientSession(read, write) as session:
              await session.initialize()

- `ChunkedStdioTransport(command, args, env=...)` plugs that into `fastmcp.Client`::

      async with Client(ChunkedStdioTransport("codepager", ["serve", "--transport", "chunked-stdio"])) as client:
          result = await client.call_tool("regex_search", {"pattern": "TODO"})

Spawning and stopping the server (own process group, close stdin, grace period, then kill the
tree) is the SDK's `mcp.client.stdio` code, reused; only the line reader and writer differ.

- `KeptStdioTransport(command, args, env=...)` is fastmcp's keep-alive `StdioTransport` (one
  server process shared by every client, started again when it dies) over the same streams,
  for any stdio server, framing or not: by default it never frames what it sends
  (`PLAIN_STDIO`). The proxy reaches its stdio backends with it because the SDK's own reader
  re-joins and re-splits everything buffered on every read, so one 50 MB reply line costs
  minutes of CPU while the backend's channel stays busy; this reader is linear and bounded.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import TextIO

import anyio
import anyio.lowlevel
import mcp_types as types
from fastmcp.client.transports.base import SessionKwargs, TransportOptions
from mcp import StdioServerParameters
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from server import sdk_shim
from server.sdk_shim import KeepAliveStdioTransport, OwnStreamsTransport, StreamsFactory, TransportStreams
from server.transports.chunked_stdio import expire_idle_messages, reassembled
from server.transports.framing import FramingOptions, Reassembler
from server.transports.wire import HEAD_BYTES, Refused, TooLarge, leading_fields, reply_id

logger = logging.getLogger(__name__)

PLAIN_STDIO = FramingOptions(chunk_limit=sys.maxsize)
"""Framing that never frames: every message leaves as one plain line (for servers that speak
plain stdio), while incoming lines are still read with the bounded reader."""


def _unanswerable(response: TooLarge | Refused, limit_setting: str) -> SessionMessage | None:
    """An error for the request whose response was refused (for its size or another reassembly
    limit), so its caller fails at once instead of waiting; None when the head does not show a
    response's id."""
    if isinstance(response, Refused):
        message = f"this client refused the server's response: {response.reason}"
    else:
        message = (
            f"the server's response is at least {response.size} bytes, over this client's limit of "
            f"{response.limit} bytes ({limit_setting}); ask for less (a smaller page)"
        )
    return _error_for(response.head, message)


def _unreadable(line: bytes, exc: Exception) -> SessionMessage | None:
    """An error for the request whose response arrived whole but does not parse (a lone
    surrogate escape, nesting past the SDK's validator): otherwise the SDK only logs it and
    the caller waits out its whole timeout (300 s by default). None when no id shows."""
    reason = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
    return _error_for(line[:HEAD_BYTES], f"this client could not read the server's response: {reason}")


def _error_for(head: bytes, message: str) -> SessionMessage | None:
    """A JSON-RPC error answering the response whose first bytes are `head`, if they show its id."""
    fields = leading_fields(head)
    request_id = reply_id(fields.get("id"))
    if "method" in fields or request_id is None:
        return None
    error = types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=types.ErrorData(code=types.INTERNAL_ERROR, message=message)
    )
    return SessionMessage(error)


@contextlib.asynccontextmanager
async def chunked_stdio_client(
    server: StdioServerParameters,
    *,
    errlog: TextIO = sys.stderr,
    framing: FramingOptions | None = None,
) -> AsyncIterator[TransportStreams]:
    """Spawn `server` and yield (read, write) streams that speak chunked framing to it.

    Outgoing messages above the chunk limit are framed, smaller ones go as plain lines;
    incoming lines of either kind are accepted, so this also talks to a plain stdio server
    as long as we send nothing above the limit. An incoming message over
    `framing.max_message_bytes` is discarded as it streams (never held whole) and its
    request fails with an error rather than waiting forever.
    """
    framing = framing or FramingOptions()
    reassembler = Reassembler(framing)
    command = await sdk_shim.executable_command(server.command)
    process = await sdk_shim.create_process(
        command=command,
        args=server.args,
        env=get_default_environment() | (server.env or {}),
        errlog=errlog,
        cwd=server.cwd,
    )
    assert process.stdin is not None and process.stdout is not None, "the server is spawned with pipes"
    stdin, stdout = process.stdin, process.stdout

    # No awaits between the spawn and the task group, so a cancellation cannot leak the process.
    read_stream_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_stream_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()
    shutting_down = False

    async def stdout_reader() -> None:
        try:
            async with read_stream_writer:
                try:
                    async for message in reassembled(stdout, reassembler, framing.max_line_bytes):
                        if isinstance(message, TooLarge):  # a Refused one the reassembler has logged
                            logger.error(
                                "chunked stdio client: discarded a message of at least %d bytes (limit %d)",
                                message.size, message.limit,
                            )  # fmt: skip
                        if isinstance(message, (TooLarge, Refused)):
                            if (error := _unanswerable(message, framing.limit_setting)) is None:
                                continue
                            parsed: SessionMessage | Exception = error
                        else:
                            parsed = sdk_shim.parse_line(message.decode("utf-8", "replace"))
                            if isinstance(parsed, Exception):
                                parsed = _unreadable(message, parsed) or parsed
                        try:
                            await read_stream_writer.send(parsed)
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            return
                finally:
                    await sdk_shim.drain_stdout(process)
        except anyio.ClosedResourceError:
            pass
        except (anyio.BrokenResourceError, ConnectionError):
            if not shutting_down:
                logger.exception("reading from the chunked stdio server's stdout failed mid-session")

    async def stdin_writer() -> None:
        try:
            async with write_stream_reader:
                async for session_message in write_stream_reader:
                    json = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stdin.send(framing.encode(json))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server may still be running: end the session rather than leave a request hanging.
            await read_stream_writer.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        """The SDK's order: stop reading, let accepted writes flush briefly, stop the server."""
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(sdk_shim.WRITER_FLUSH_TIMEOUT_S):
            await writer_done.wait()
        await sdk_shim.stop_server_process(process)
        await sdk_shim.aclose_all(read_stream, write_stream, read_stream_writer, write_stream_reader)
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stdin_writer)
        tg.start_soon(expire_idle_messages, reassembler)
        try:
            yield read_stream, write_stream
        finally:
            shutting_down = True
            # Shielded and bounded inside, so a cancelled caller cannot leak the server process.
            with anyio.CancelScope(shield=True):
                await shutdown()
            tg.cancel_scope.cancel()


class ChunkedStdioTransport(OwnStreamsTransport):
    """A `fastmcp.Client` transport that runs a server command over chunked stdio.

    Each `async with Client(...)` spawns the command and stops it on exit; unlike fastmcp's
    `StdioTransport` there is no keep-alive between connections.
    """

    def __init__(
        self,
        command: str,
        args: list[str] | None = None,
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        log_file: TextIO | None = None,
        framing: FramingOptions | None = None,
    ) -> None:
        """`env` is merged over the SDK's safe default environment (PATH, HOME, ...), as with
        fastmcp's `StdioTransport`; `log_file` receives the server's stderr (default: ours)."""
        self.server = StdioServerParameters(command=command, args=args or [], env=env, cwd=cwd)
        self.log_file = log_file
        self.framing = framing or FramingOptions()

    def open_streams(
        self, options: TransportOptions, session_kwargs: SessionKwargs
    ) -> AbstractAsyncContextManager[TransportStreams]:
        return chunked_stdio_client(self.server, errlog=self.log_file or sys.stderr, framing=self.framing)

    def __repr__(self) -> str:
        return f"<ChunkedStdioTransport(command={self.server.command!r}, args={self.server.args!r})>"


class KeptStdioTransport(KeepAliveStdioTransport):
    """fastmcp's `StdioTransport` with `keep_alive` (see the module doc) whose session runs on
    `chunked_stdio_client`: the server's output is read by the linear, bounded line reader,
    and a reply over `framing.max_message_bytes` fails its call with an error saying so
    instead of being held."""

    def __init__(
        self,
        command: str,
        args: list[str],
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        framing: FramingOptions = PLAIN_STDIO,
    ) -> None:
        super().__init__(command, args, env=env, cwd=cwd, keep_alive=True)
        self.framing = framing

    def streams(self) -> StreamsFactory:
        server = StdioServerParameters(command=self.command, args=self.args, env=self.env, cwd=self.cwd)
        return functools.partial(chunked_stdio_client, server, framing=self.framing)
