"""Builds the FastMCP app from `Settings`: the services, the tools, the middleware.

Start-up does no heavy work: the embedding model and the index load in the background (see
`server.indexing`), so the MCP handshake answers at once.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

from fastmcp import FastMCP

from search_engine.engine import SearchEngine
from server import __version__
from server.errors import ErrorMiddleware
from server.rendering import Renderer
from server.services import Services
from server.settings import Settings
from server.tools.search import register_search_tools
from sessions import CursorCodec, MemoryStore, Pager, load_or_create_key

log = logging.getLogger("codepager")

INSTRUCTIONS = (
    "codepager searches the codebase under its roots. Use hybrid_search to find code by name or "
    "meaning, regex_search for exact patterns. Results are paged: pass pagination.next_cursor "
    "back as `cursor` until it is null. Large pages arrive as a JSONL file described in "
    "results.file_ref."
)


def build_services(settings: Settings) -> Services:
    roots = [Path(r).resolve() for r in settings.server.roots]
    for root in roots:
        if not root.is_dir():
            raise ValueError(f"root is not a directory: {root}")
    engine = SearchEngine(settings.engine_config())
    sess = settings.sessions
    store = MemoryStore(
        ttl_s=sess.ttl_s,
        max_sessions=sess.max_sessions,
        max_bytes=int(sess.max_memory_mb * 1024 * 1024),
        sweep_interval_s=sess.sweep_interval_s,
    )
    key = sess.secret_key or load_or_create_key(settings.index.cache_dir)
    codec = CursorCodec(key, max_age_s=sess.cursor_max_age_s)
    pager = Pager(
        engine,
        store,
        codec,
        default_page_size=settings.search.default_page_size,
        max_page_size=settings.search.max_page_size,
    )
    return Services(settings=settings, roots=roots, engine=engine, pager=pager, renderer=Renderer())


def build_app(settings: Settings, services: Services | None = None) -> FastMCP:
    services = services or build_services(settings)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastMCP) -> AsyncIterator[dict[str, object]]:
        try:
            yield {}
        finally:
            services.pager.store.close()

    app = FastMCP("codepager", version=__version__, instructions=INSTRUCTIONS, lifespan=lifespan)
    app.add_middleware(ErrorMiddleware())
    register_search_tools(app, services)
    return app
