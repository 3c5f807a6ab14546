"""Run a FastMCP app (the search server or the proxy) on the configured transport."""

from __future__ import annotations

import anyio
from fastmcp import FastMCP
from starlette.middleware import Middleware

from server.settings import ServerSettings
from server.transports.framing import FramingOptions


def framing_options(settings: ServerSettings) -> FramingOptions:
    """The chunked-stdio server's framing: its frame size, and what it will buffer from a client."""
    return FramingOptions(
        chunk_limit=settings.chunk_limit,
        timeout_s=settings.chunk_timeout_s,
        max_buffered_bytes=settings.chunk_max_buffered_bytes,
        max_message_bytes=settings.max_request_bytes,
        max_partial_messages=settings.chunk_max_partial_messages,
        max_frames_per_message=settings.chunk_max_frames_per_message,
    )


def run_app(app: FastMCP, settings: ServerSettings) -> None:
    if settings.transport == "stdio":
        from server.transports.checked_stdio import run_checked_stdio

        anyio.run(run_checked_stdio, app, settings.max_request_bytes)
    elif settings.transport == "http":
        from server.transports.http_limit import RequestSizeLimit

        limit = Middleware(RequestSizeLimit, max_request_bytes=settings.max_request_bytes)
        app.run("http", show_banner=False, host=settings.host, port=settings.port, middleware=[limit])
    else:
        from server.transports.chunked_stdio import run_chunked_stdio

        anyio.run(run_chunked_stdio, app, framing_options(settings))
