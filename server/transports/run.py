"""Run a FastMCP app (the search server or the proxy) on the configured transport."""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
from fastmcp import FastMCP
from fastmcp.server.context import reset_transport, set_transport
from mcp.shared.message import SessionMessage
from starlette.middleware import Middleware

from server.auth import BearerTokenGuard
from server.sdk_shim import ReadStream, WriteStream, app_lifespan, serve_connection
from server.settings import ServerSettings
from server.transports import framing
from server.transports.framing import FramingOptions

StdioStreams = AbstractAsyncContextManager[tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]]
"""One stdio connection's (read, write) streams: `checked_stdio_server` (plain lines) or
`chunked_stdio_server` (chunked framing)."""


def framing_options(settings: ServerSettings) -> FramingOptions:
    """The chunked-stdio server's framing: what it will buffer from a client (its frame size,
    what all incomplete messages may hold, how many there may be and how many frames a message
    are framing's constants, read now: a test's server patches them in `framing`)."""
    return FramingOptions(
        chunk_limit=framing.DEFAULT_CHUNK_LIMIT,
        timeout_s=settings.request_timeout_s,
        max_buffered_bytes=framing.DEFAULT_MAX_BUFFERED_BYTES,
        max_message_bytes=settings.max_request_bytes,
    )


async def run_stdio(app: FastMCP[Any], streams: StdioStreams) -> None:
    """Serve `app` over this process's stdin/stdout until stdin closes. The same steps as
    `FastMCP.run_stdio_async` (transport marked "stdio", lifespan entered once, one connection
    served) over `streams`, which decide the line format, e.g.
    `anyio.run(run_stdio, app, chunked_stdio_server(FramingOptions(chunk_limit=...)))`."""
    token = set_transport("stdio")
    try:
        async with app_lifespan(app), streams as (read_stream, write_stream):
            await serve_connection(app, read_stream, write_stream)
    finally:
        reset_transport(token)


def run_app(app: FastMCP, settings: ServerSettings, token: str | None) -> None:
    """Serve `app` until its transport ends; on HTTP every request must carry `token` (None:
    no check, which only `--no-auth` asks for: server/auth_token.py decides)."""
    if settings.transport == "stdio":
        from server.transports.checked_stdio import checked_stdio_server

        anyio.run(run_stdio, app, checked_stdio_server(settings.max_request_bytes))
    elif settings.transport == "http":
        app.run(
            "http", show_banner=False, host=settings.host, port=settings.port,
            middleware=http_middleware(settings, token),
            # uvicorn's loggers at the configured level, written through the root logger's stderr
            # handler (serve_cmd) instead of uvicorn's own (which sends access lines to stdout).
            log_level=settings.log_level, uvicorn_config={"log_config": None, "http": http_protocol(settings)},
        )  # fmt: skip
    else:
        from server.transports.chunked_stdio import chunked_stdio_server

        anyio.run(run_stdio, app, chunked_stdio_server(framing_options(settings)))


def http_protocol(settings: ServerSettings) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, with a deadline on each request's head (server/transports/http_head.py):
    nothing in the middleware below can act before the head is complete."""
    from server.transports.http_head import head_deadline_protocol

    return head_deadline_protocol(settings.request_timeout_s)


def http_middleware(settings: ServerSettings, token: str | None) -> list[Middleware]:
    """The checks in front of the MCP endpoint, outermost first: the ones that need only the
    headers (Host/Origin, then the token) answer before a single body byte is read, so a request
    they refuse costs no memory; only then is the body read, bounded in size and idle time."""
    from server.transports.http_limit import RequestBodyLimits
    from server.transports.http_origin import HostOriginGuard

    guard = Middleware(
        HostOriginGuard,
        bind_host=settings.host,
        allowed_hosts=settings.allowed_hosts,
        allowed_origins=settings.allowed_origins,
    )
    auth = [Middleware(BearerTokenGuard, token=token)] if token is not None else []
    body = Middleware(
        RequestBodyLimits,
        max_request_bytes=settings.max_request_bytes,
        body_timeout_s=settings.request_timeout_s,
        max_buffered_bytes=framing.DEFAULT_MAX_BUFFERED_BYTES,
    )
    return [guard, *auth, body]
