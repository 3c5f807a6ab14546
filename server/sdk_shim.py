"""Every private name of the MCP SDK and fastmcp that codepager uses, in one place.

The transports reuse the SDK's stdio plumbing (claiming fds 0/1, spawning and stopping a
server process, parsing a line) and fastmcp's app internals (its lifespan and low-level
server) instead of copying them; the proxy hooks fastmcp's metadata forwarding; the kept stdio
client copies fastmcp's keep-alive `StdioTransport.connect`, and the proxy's HTTP backends
fastmcp's `StreamableHttpTransport.connect_session`. None of these is public API, so a
release may move or change any of them: they are imported or reached only here, under public
names, and `tests/test_sdk_shim.py` touches each one (`PRIVATE_ATTRIBUTES`), so such a release
fails in one test naming the one that moved instead of deep inside a transport. `mcp` is
pinned in pyproject.toml to the range this was checked against (mcp 2.3, fastmcp 4.1).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import sys
import zlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Any, BinaryIO, Literal, TextIO

import anyio
import httpx2
from fastmcp import FastMCP
from fastmcp.client.dependencies import _get_forwardable_http_headers
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
from fastmcp.client.transports.base import ClientTransport, SessionKwargs, TransportOptions
from fastmcp.server.providers.proxy import ProxyMetadataMiddleware as _FastMCPProxyMetadata
from mcp import ClientSession
from mcp.client import stdio as _client_stdio
from mcp.client._transport import TransportStreams
from mcp.client.streamable_http import streamable_http_client
from mcp.server import stdio as _server_stdio
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared._stream_protocols import ReadStream, WriteStream
from typing_extensions import Unpack

__all__ = [
    "PRIVATE_ATTRIBUTES",
    "WRITER_FLUSH_TIMEOUT_S",
    "KeepAliveStdioTransport",
    "LargeReplyHttpTransport",
    "OwnStreamsTransport",
    "ProxyMetadataMiddleware",
    "ReadStream",
    "RefusedReplyError",
    "StreamsFactory",
    "TransportStreams",
    "WriteStream",
    "aclose_all",
    "app_lifespan",
    "claim_stdin",
    "claim_stdout",
    "create_process",
    "drain_stdout",
    "executable_command",
    "parse_line",
    "serve_connection",
    "stop_server_process",
]

# --- mcp.client.stdio: spawning, reading and stopping a stdio server (the chunked client) ---
executable_command = _client_stdio._get_executable_command
create_process = _client_stdio._create_platform_compatible_process
parse_line = _client_stdio._parse_line
drain_stdout = _client_stdio._drain_stdout
stop_server_process = _client_stdio._stop_server_process
aclose_all = _client_stdio._aclose_all
WRITER_FLUSH_TIMEOUT_S: float = _client_stdio._WRITER_FLUSH_TIMEOUT
"""How long the SDK lets accepted writes flush before stopping the server process."""


# --- mcp.server.stdio: taking fds 0 and 1 for the wire (the stdio servers) ---
def _claim(stack: AsyncExitStack, fd: int, stream: TextIO, mode: Literal["rb", "wb"], diversion: Any) -> BinaryIO:
    wire, release = _server_stdio._claim_fd(fd, stream, mode, diversion)
    if release is not None:
        stack.callback(release)
    return wire


def claim_stdin(stack: AsyncExitStack) -> BinaryIO:
    """fd 0 for the wire through the SDK's claim (stdin then reads from /dev/null), released
    when `stack` closes."""
    return _claim(stack, 0, sys.stdin, "rb", _server_stdio._open_stdin_diversion)


def claim_stdout(stack: AsyncExitStack) -> BinaryIO:
    """fd 1 for the wire (fd 1 then points at stderr, so a stray print() lands in the log, not
    inside a frame), released when `stack` closes."""
    return _claim(stack, 1, sys.stdout, "wb", _server_stdio._open_stdout_diversion)


# --- fastmcp.FastMCP: what `run_stdio_async` does, on streams of our own ---
def app_lifespan(app: FastMCP[Any]) -> AbstractAsyncContextManager[None]:
    """The app's lifespan, entered once per process as `FastMCP.run_stdio_async` does."""
    return app._lifespan_manager()


async def serve_connection(app: FastMCP[Any], read_stream: ReadStream[Any], write_stream: WriteStream[Any]) -> None:
    """Serve one MCP connection over `read_stream`/`write_stream` until it ends."""
    lowlevel = app._mcp_server
    await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


# --- fastmcp's proxy: forwarding a backend's metadata at connect time ---
class ProxyMetadataMiddleware(_FastMCPProxyMetadata):
    """fastmcp's `ProxyMetadataMiddleware` with its upstream read as a public method to
    override (`read_upstream`)."""

    async def _read_upstream(self, client: Any, context: Any) -> Any:
        return await self.read_upstream(client, context)

    async def read_upstream(self, client: Any, context: Any) -> Any:
        """The backend's metadata, or None; fastmcp's own read unless overridden."""
        return await super()._read_upstream(client, context)


# --- fastmcp's keep-alive StdioTransport, over streams of our own ---
StreamsFactory = Callable[[], AbstractAsyncContextManager[TransportStreams]]
"""Opens the (read, write) streams of one fresh server process."""


class KeepAliveStdioTransport(StdioTransport):
    """fastmcp's keep-alive `StdioTransport` whose held session runs over the streams
    `streams()` opens instead of over the SDK's stdio reader. `connect` is fastmcp 4.1's, step
    for step: one session kept; rebuilt when idle for a client with other options, refused
    while in use; started again once its process has died."""

    def streams(self) -> StreamsFactory:
        """What opens a server process's streams. It must hold no reference to the transport:
        the session task keeps it, and the transport's `__del__` is what stops that task."""
        raise NotImplementedError

    async def connect(
        self,
        *,
        transport_options: TransportOptions | None = None,
        **session_kwargs: Unpack[SessionKwargs],
    ) -> ClientSession | None:
        options = transport_options or TransportOptions()
        async with self._connect_lock:
            if self._connect_task is not None and self._session_options != options:
                if self._active_sessions:
                    raise RuntimeError(
                        "this stdio transport has a live session built for other connection options that "
                        "another client is using; give each client its own transport"
                    )
                await self.disconnect()
            if self._connect_task is not None and (self._connect_task.done() or self._is_session_dead()):
                await self.disconnect()
            if self._connect_task is not None:
                return self._session
            self._session_options = options
            session: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
            self._connect_task = asyncio.create_task(
                _hold_session(self.streams(), options, session_kwargs, session, self._ready_event, self._stop_event)
            )
            await self._ready_event.wait()
            if self._connect_task.done() and (failure := self._connect_task.exception()) is not None:
                raise failure
            self._session = await session
            return self._session

    async def disconnect(self) -> None:
        """fastmcp's own, unchanged; overridden only to give it the annotation it lacks."""
        await super().disconnect()  # type: ignore[no-untyped-call]  # fastmcp 4.1: `async def disconnect(self):`


async def _hold_session(
    open_streams: StreamsFactory,
    options: TransportOptions,
    session_kwargs: SessionKwargs,
    session: asyncio.Future[ClientSession],
    ready: anyio.Event,
    stop: anyio.Event,
) -> None:
    """Hold one session open until `stop` is set. A task of its own, as in fastmcp: the streams
    must be closed by the task that opened them, and it holds no reference to the transport,
    whose `__del__` sets `stop`."""
    try:
        async with session_over(open_streams(), options, session_kwargs) as opened:
            session.set_result(opened)
            ready.set()
            await stop.wait()
    except Exception:
        ready.set()  # connect() then raises this task's failure
        raise


@contextlib.asynccontextmanager
async def session_over(
    streams: AbstractAsyncContextManager[TransportStreams], options: TransportOptions, session_kwargs: SessionKwargs
) -> AsyncIterator[ClientSession]:
    """A client session over the streams `streams` opens, of the class the client's options
    name, as fastmcp's transports open one; closed before its streams."""
    async with (
        streams as (read_stream, write_stream),
        options.session_class(read_stream, write_stream, **session_kwargs) as session,
    ):
        yield session


class OwnStreamsTransport(ClientTransport):
    """A fastmcp client transport that opens each connection's streams itself (`open_streams`):
    `connect_session` puts the client's session on them, so a transport says only how its
    streams come about."""

    @abc.abstractmethod
    def open_streams(
        self, options: TransportOptions, session_kwargs: SessionKwargs
    ) -> AbstractAsyncContextManager[TransportStreams]:
        """The (read, write) streams of one connection, closed when it ends."""

    @contextlib.asynccontextmanager
    async def connect_session(
        self,
        *,
        transport_options: TransportOptions | None = None,
        **session_kwargs: Unpack[SessionKwargs],
    ) -> AsyncIterator[ClientSession]:
        options = transport_options or TransportOptions()
        async with session_over(self.open_streams(options, session_kwargs), options, session_kwargs) as session:
            yield session


# --- fastmcp's StreamableHttpTransport, taking replies as large as a stdio backend's ---
class RefusedReplyError(httpx2.StreamError):
    """A backend's reply this client will not read: over the proxy's limit, or compressed in a
    way it did not ask for or that does not inflate. A stream error, which the SDK answers with a
    JSON-RPC error for the request that asked (instead of leaving it waiting)."""


class LargeReplyHttpTransport(OwnStreamsTransport, StreamableHttpTransport):
    """fastmcp's `StreamableHttpTransport` taking replies of up to `max_message_bytes`, as a
    stdio backend's are. fastmcp leaves the SDK's limit on one server-sent event, 1 MiB, so a
    tool result over it from a server that answers with events (the TypeScript SDK's default,
    and the handshake era's) failed ("SSE stream failed: Server-sent event exceeded the 1048576
    byte limit"), and a reply sent as plain JSON was read whole however large. `open_streams`
    is fastmcp 4.1's `connect_session`, step for step up to the session, with the event limit
    passed and JSON bodies counted."""

    def __init__(self, url: str, *, max_message_bytes: int, **kwargs: Any) -> None:
        super().__init__(url, **kwargs)
        self.max_message_bytes = max_message_bytes

    async def bound_body(self, response: httpx2.Response) -> None:
        """httpx response hook: a JSON reply is read no further than the limit, counted after
        decompression (a gzip bomb is bounded by what it inflates to, not by what it weighs):
        the body is decompressed here, within the limit, and httpx then sees it uncompressed."""
        if not response.headers.get("content-type", "").lower().startswith("application/json"):
            return
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        response.stream = _BoundedBody(response.stream, self.max_message_bytes, encoding)
        if "content-encoding" in response.headers:
            del response.headers["content-encoding"]

    @contextlib.asynccontextmanager
    async def open_streams(
        self, options: TransportOptions, session_kwargs: SessionKwargs
    ) -> AsyncIterator[TransportStreams]:
        headers = (_get_forwardable_http_headers() if options.forward_incoming_headers else {}) | self.headers
        read_timeout_seconds = session_kwargs.get("read_timeout_seconds")
        timeout = None if read_timeout_seconds is None else httpx2.Timeout(30.0, read=read_timeout_seconds)
        verify_factory = self._make_verify_factory()
        if self.httpx_client_factory is not None:
            http_client = self.httpx_client_factory(
                headers=headers,
                auth=self.auth,
                follow_redirects=True,  # type: ignore[call-arg]  # as fastmcp passes it
                **({"timeout": timeout} if timeout else {}),
            )
        elif verify_factory is not None:
            http_client = verify_factory(headers=headers, timeout=timeout, auth=self.auth)
        else:
            http_client = create_mcp_http_client(headers=headers, timeout=timeout, auth=self.auth)
        self._session_id = None
        http_client.headers["accept-encoding"] = _ACCEPTED_ENCODINGS
        http_client.event_hooks.setdefault("response", []).extend([self._capture_session_id, self.bound_body])
        async with (
            http_client,
            streamable_http_client(
                self.url, http_client=http_client, max_sse_event_size=self.max_message_bytes
            ) as streams,
        ):
            yield streams


#: The compressions a backend's JSON reply may use (asked for, and decoded by `_BoundedBody`).
_ACCEPTED_ENCODINGS = "gzip, deflate"
#: zlib window bits: gzip or zlib headers, detected (deflate without a header is retried raw).
_ZLIB_OR_GZIP, _RAW_DEFLATE = 32 + 15, -15


class _BoundedBody(httpx2.AsyncByteStream):
    """A response body, decompressed, that fails (RefusedReplyError) once it holds more than
    `limit` bytes: each step inflates no more than what is left of the limit."""

    def __init__(self, inner: Any, limit: int, encoding: str) -> None:
        self.inner, self.limit, self.encoding = inner, limit, encoding

    def too_large(self) -> RefusedReplyError:
        return RefusedReplyError(
            f"the server's response is over this client's limit of {self.limit:,} bytes "
            "(the most codepager proxy reads of one backend reply); ask for less"
        )

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.encoding not in ("identity", "gzip", "x-gzip", "deflate"):
            raise RefusedReplyError(
                f"the server compressed its response as {self.encoding!r}, which this client neither "
                f"asked for nor reads (it takes {_ACCEPTED_ENCODINGS})"
            )
        inflate = None if self.encoding == "identity" else zlib.decompressobj(_ZLIB_OR_GZIP)
        seen, first = 0, True
        try:
            async for chunk in self.inner:
                data = chunk
                if inflate is not None:
                    if first and self.encoding == "deflate":
                        inflate, data = _start_deflate(chunk, self.limit + 1)
                    else:
                        data = inflate.decompress(chunk, self.limit + 1 - seen)
                    if inflate.unconsumed_tail:
                        raise self.too_large()
                first = False
                seen += len(data)
                if seen > self.limit:
                    raise self.too_large()
                yield data
            rest = inflate.flush() if inflate is not None else b""
        except zlib.error:
            raise RefusedReplyError("the server's compressed response is malformed") from None
        if seen + len(rest) > self.limit:
            raise self.too_large()
        if rest:
            yield rest

    async def aclose(self) -> None:
        await self.inner.aclose()


def _start_deflate(chunk: bytes, room: int) -> tuple[Any, bytes]:
    """A deflate stream's inflater and its first output: with the zlib header the format asks
    for, or without, as some servers send it."""
    inflate = zlib.decompressobj(_ZLIB_OR_GZIP)
    try:
        return inflate, inflate.decompress(chunk, room)
    except zlib.error:
        inflate = zlib.decompressobj(_RAW_DEFLATE)
        return inflate, inflate.decompress(chunk, room)


PRIVATE_ATTRIBUTES: tuple[tuple[str, str], ...] = (
    ("mcp.client.stdio", "_get_executable_command"),
    ("mcp.client.stdio", "_create_platform_compatible_process"),
    ("mcp.client.stdio", "_parse_line"),
    ("mcp.client.stdio", "_drain_stdout"),
    ("mcp.client.stdio", "_stop_server_process"),
    ("mcp.client.stdio", "_aclose_all"),
    ("mcp.client.stdio", "_WRITER_FLUSH_TIMEOUT"),
    ("mcp.client", "_transport"),
    ("mcp.client._transport", "TransportStreams"),
    ("mcp.shared", "_stream_protocols"),
    ("mcp.shared._stream_protocols", "ReadStream"),
    ("mcp.shared._stream_protocols", "WriteStream"),
    ("mcp.server.stdio", "_claim_fd"),
    ("mcp.server.stdio", "_open_stdin_diversion"),
    ("mcp.server.stdio", "_open_stdout_diversion"),
    ("fastmcp.FastMCP", "_lifespan_manager"),
    ("fastmcp.FastMCP()", "_mcp_server"),
    ("fastmcp.server.providers.proxy.ProxyMetadataMiddleware", "_read_upstream"),
    ("fastmcp.client.transports.StdioTransport()", "_connect_lock"),
    ("fastmcp.client.transports.StdioTransport()", "_connect_task"),
    ("fastmcp.client.transports.StdioTransport()", "_session"),
    ("fastmcp.client.transports.StdioTransport()", "_session_options"),
    ("fastmcp.client.transports.StdioTransport()", "_active_sessions"),
    ("fastmcp.client.transports.StdioTransport()", "_ready_event"),
    ("fastmcp.client.transports.StdioTransport()", "_stop_event"),
    ("fastmcp.client.transports.StdioTransport", "_is_session_dead"),
    ("fastmcp.client.dependencies", "_get_forwardable_http_headers"),
    ("fastmcp.client.transports.StreamableHttpTransport", "_make_verify_factory"),
    ("fastmcp.client.transports.StreamableHttpTransport", "_capture_session_id"),
    ("fastmcp.client.transports.StreamableHttpTransport()", "_session_id"),
    ("mcp.shared", "_httpx_utils"),
    ("mcp.shared._httpx_utils", "create_mcp_http_client"),
)
"""(owner, name) of every private name used above; an owner ending in `()` is an instance of
that class (an attribute set in its `__init__`). The test resolves each one."""
