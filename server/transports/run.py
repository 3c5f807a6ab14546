"""Run a FastMCP app (the search server or the proxy) on the configured transport."""

from __future__ import annotations

import anyio
from fastmcp import FastMCP

from server.settings import ServerSettings


def run_app(app: FastMCP, settings: ServerSettings) -> None:
    if settings.transport == "stdio":
        from server.transports.checked_stdio import run_checked_stdio

        anyio.run(run_checked_stdio, app)
    elif settings.transport == "http":
        app.run("http", show_banner=False, host=settings.host, port=settings.port)
    else:
        from server.transports.chunked_stdio import run_chunked_stdio
        from server.transports.framing import FramingOptions

        anyio.run(run_chunked_stdio, app, FramingOptions(chunk_limit=settings.chunk_limit))
