"""Builds the FastMCP app from `Settings`: the services, the tools, the middleware.

Start-up does no heavy work: the embedding model and the index load in the background (see
`server.background_indexer`), so the MCP handshake answers at once.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

from fastmcp import FastMCP

from search_engine import SearchEngine
from server import __version__
from server.background_indexer import BackgroundIndexer
from server.errors import ErrorMiddleware
from server.jq import jq_view
from server.output import OffloadStore, OutputLayer
from server.services import Services
from server.settings import SessionSettings, Settings
from server.sql import Datasets
from server.tools.bounds import ArgumentCount
from server.tools.index import register_index_tools
from server.tools.registry import own_tools
from server.tools.results import register_results_resources, register_sql_tools
from server.tools.schemas import CompactSchemas
from server.tools.search import register_search_tools
from sessions import (
    DEFAULT_MAX_SESSIONS,
    CursorCodec,
    MemoryStore,
    Pager,
    SessionStore,
    SessionStoreUnavailableError,
    load_or_create_key,
    redacted,
)

log = logging.getLogger("codepager")

#: Result lists the session store keeps, least recently used evicted first. Not a setting (it
#: was `sessions.max_sessions`): `sessions.max_memory_mb` bounds what the cache costs, and this
#: only stops thousands of tiny lists (each a few hundred bytes of bookkeeping) piling up; an
#: evicted list is searched again from its cursor. Read when the store is made.
MAX_SESSIONS = DEFAULT_MAX_SESSIONS

INSTRUCTIONS = (
    "codepager searches the codebase under its roots. Use hybrid_search to find code by name or "
    "meaning, regex_search for exact patterns. Results are paged: pass pagination.next_cursor "
    "back as `cursor` until it is null. A page too big to show arrives as a JSONL file described "
    "in results.file_ref: read it in line ranges (codepager://results/ID/lines/START-END), with jq, "
    "or with SQL (analyze-with-duckdb). Each tool's input schema describes its options."
)


def session_store(sess: SessionSettings) -> SessionStore:
    """The configured backend: in-process by default, Redis (shared by replicas) for a URL.

    An unreachable Redis does not stop start-up: the server answers what it can, paging calls
    report "session store unavailable" until Redis is back, then recover on their own."""
    max_bytes = int(sess.max_memory_mb * 1024 * 1024)
    if sess.backend == "memory":
        return MemoryStore(
            ttl_s=sess.ttl_s,
            max_sessions=MAX_SESSIONS,
            max_bytes=max_bytes,
        )
    if not sess.backend.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError(f"sessions.backend must be 'memory' or a redis://host:port/db URL, got {sess.backend!r}")
    try:
        from sessions import RedisStore
    except ModuleNotFoundError as exc:
        if exc.name != "redis":
            raise
        raise ValueError(
            f"sessions.backend is a Redis URL ({redacted(sess.backend)}), but the redis client is not installed: "
            'pip install "codepager[redis]", or use sessions.backend = "memory"'
        ) from None

    # The budget also caps one session, encoded, as the in-process store's does (Session.size):
    # the most a replica ever inflates from a blob someone else may have written.
    store = RedisStore(
        sess.backend,
        ttl_s=sess.ttl_s,
        max_sessions=MAX_SESSIONS,
        max_bytes=max_bytes,
        max_session_bytes=max_bytes,
    )
    if sess.secret_key is None:
        log.warning(
            "sessions.backend is Redis but sessions.secret_key is unset: replicas on other machines "
            "will refuse each other's cursors; give all replicas the same secret_key"
        )
    try:
        store.ping()
    except SessionStoreUnavailableError as exc:
        log.warning("%s", exc)
    return store


def _cursor_key(cache_dir: Path) -> bytes:
    """The kept cursor key, or, if the cache dir cannot hold it, one for this process only: an
    unwritable cache dir must not stop the server (regex search needs no disk of its own)."""
    try:
        return load_or_create_key(cache_dir)
    except OSError as exc:
        log.warning(
            "cannot keep the cursor key in %s (%s); using a key for this process only, so "
            "cursors will not survive a restart. Make index.cache_dir writable or set sessions.secret_key.",
            cache_dir, exc.strerror or exc,
        )  # fmt: skip
        return secrets.token_urlsafe(48).encode()


def build_services(settings: Settings) -> Services:
    roots = [Path(r).resolve() for r in settings.server.roots]
    for root in roots:
        if not root.is_dir():
            raise ValueError(f"root is not a directory: {root}")
    engine = SearchEngine(settings.engine_config())
    sess = settings.sessions
    store = session_store(sess)
    # A configured key is checked (empty refused, short warned about); else the kept one.
    if sess.secret_key is not None:
        key = load_or_create_key(settings.index.cache_dir, sess.secret_key)
    else:
        key = _cursor_key(settings.index.cache_dir)
    codec = CursorCodec(key, max_age_s=sess.cursor_max_age_s)
    pager = Pager(
        engine,
        store,
        codec,
        default_page_size=settings.search.default_page_size,
        view_fn=jq_view(settings.jq),
    )
    offload = OffloadStore.from_settings(settings.offload)
    return Services(
        settings=settings,
        roots=roots,
        engine=engine,
        pager=pager,
        offload=offload,
        datasets=Datasets(offload, limits=settings.sql),
        layer=OutputLayer(settings.offload, settings.sql, offload),
        indexer=BackgroundIndexer(engine, settings.index.ready_wait_s),
    )


def build_app(settings: Settings, services: Services | None = None) -> FastMCP:
    services = services or build_services(settings)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastMCP) -> AsyncIterator[dict[str, object]]:
        services.offload.sweeper.start()
        if settings.index.index_on_start:
            services.indexer.start(services.roots)
        log.debug("serving %d root(s); indexing on start: %s", len(services.roots), settings.index.index_on_start)
        try:
            yield {}
        finally:
            log.debug("the transport closed: stopping")
            services.indexer.close()
            services.engine.close()
            services.offload.sweeper.close()
            services.pager.store.close()

    app = FastMCP(
        "codepager",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
    )
    app.add_middleware(ErrorMiddleware())
    app.add_middleware(ArgumentCount(app))
    register_search_tools(app, services)
    register_index_tools(app, services)
    register_sql_tools(app, services.datasets, services.layer)
    register_results_resources(app, services.offload)
    app.add_transform(CompactSchemas(own_tools(app)))
    return app
