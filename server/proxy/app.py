"""Builds the proxy: fastmcp's ProxyProvider per backend, the interceptor, the dataset tools.

The client sees the backends' tools, resources and prompts (namespaced by server name when
there are several), plus `analyze-with-duckdb`, `list-saved-datasets` and
`read-dataset-page` over the saved datasets. The proxy's own tools win a name clash (fastmcp
prefers local components over providers), so a backend that is itself a codepager server
keeps its search tools and shares the SQL ones, which see the same default offload folder.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

from fastmcp import FastMCP
from fastmcp.server.providers.proxy import ProxyProvider

from server import __version__
from server.errors import ErrorMiddleware
from server.output import MIN_OUTPUT_TOKENS, OffloadStore, OutputLayer
from server.proxy.backend_errors import BackendResultErrors
from server.proxy.backends import Backend, ToolOwners
from server.proxy.dataset_store import DatasetStore
from server.proxy.interceptor import LargeResultInterceptor
from server.proxy.saver import ResultSaver
from server.sdk_shim import ProxyMetadataMiddleware
from server.settings import OffloadSettings, Settings
from server.sql import Datasets
from server.tools.bounds import ArgumentCount
from server.tools.dataset_pages import register_dataset_page_tool
from server.tools.registry import own_tools
from server.tools.results import register_results_resources, register_sql_tools
from server.tools.schemas import CompactSchemas
from sessions import CursorCodec, load_or_create_key

log = logging.getLogger("codepager.proxy")

#: Room (in tokens) left next to a page's text for the resource_link block a file_ref answer carries.
LINK_TOKENS = 128
MANY_BACKENDS_INSTRUCTIONS = (
    "This server proxies several MCP servers; each tool name starts with its server's name. "
    "Tool results too large to send are saved as datasets: query them with analyze-with-duckdb, "
    "page through them with read-dataset-page, list them with list-saved-datasets."
)


class _BackendMetadata(ProxyMetadataMiddleware):
    """Forwards the backend's instructions at connect time, as fastmcp's own proxy does, but a
    backend that cannot be reached then must not stop the client from connecting (fastmcp
    re-raises non-transport failures, e.g. a command that exits at once, and the client then
    gets a confusing handshake error). Until the backend answers, its tools are simply not
    listed; a stdio backend is tried again on every request."""

    async def read_upstream(self, client: Any, context: Any) -> Any:
        try:
            return await super().read_upstream(client, context)
        except Exception as exc:
            log.warning("backend not reachable at connect time (its calls will fail until it is): %s", exc)
            return None


def own_tools_ceiling(settings: Settings) -> OffloadSettings:
    """The offload settings for the proxy's own tools: their page ceiling is the proxy's
    threshold, not the search server's token ceiling, so nothing the proxy answers itself is
    larger than what it would have intercepted. (Not below `MIN_OUTPUT_TOKENS`, the least a
    page envelope needs: a threshold under ~400 tokens is not met.)"""
    limit = settings.proxy.threshold_tokens - LINK_TOKENS
    return settings.offload.model_copy(
        update={"max_tokens": max(min(settings.offload.max_tokens, limit), MIN_OUTPUT_TOKENS)}
    )


def build_proxy_app(settings: Settings, backends: Sequence[Backend]) -> FastMCP:
    if not backends:
        raise ValueError("the proxy needs at least one backend server")
    proxy = settings.proxy
    offload = OffloadStore.from_settings(settings.offload)
    saved = DatasetStore.from_settings(proxy)
    sql = settings.proxy_sql()  # [sql], with [proxy.sql] over it
    datasets = Datasets(offload, saved, limits=sql)
    layer = OutputLayer(own_tools_ceiling(settings), sql, offload)
    key = load_or_create_key(settings.index.cache_dir, settings.sessions.secret_key)
    codec = CursorCodec(key, max_age_s=settings.sessions.cursor_max_age_s)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastMCP) -> AsyncIterator[dict[str, object]]:
        # Threads, not tasks: fastmcp may leave the lifespan from another task.
        saved.sweeper.start()
        offload.sweeper.start()
        try:
            yield {}
        finally:
            saved.sweeper.close()
            offload.sweeper.close()

    app = FastMCP(
        "codepager-proxy",
        version=__version__,
        instructions=MANY_BACKENDS_INSTRUCTIONS if len(backends) > 1 else None,
        lifespan=lifespan,
    )
    app.add_middleware(ErrorMiddleware())
    app.add_middleware(ArgumentCount(app))
    providers = [ProxyProvider(b.client_factory()) for b in backends]
    for backend, provider in zip(backends, providers, strict=True):
        app.add_provider(provider, namespace=backend.name if len(backends) > 1 else "")
    if len(backends) == 1:  # forward the backend's instructions, as fastmcp's own proxy does
        app.add_middleware(_BackendMetadata(providers[0]))
    register_sql_tools(app, datasets, layer)
    register_dataset_page_tool(app, datasets, codec, layer, max_output_tokens=proxy.threshold_tokens)
    register_results_resources(app, offload)
    saver = ResultSaver(saved, threshold_tokens=proxy.threshold_tokens)
    owners = ToolOwners(backends)
    app.add_middleware(BackendResultErrors(owners))
    app.add_middleware(
        LargeResultInterceptor(
            saver,
            owners,
            threshold_tokens=proxy.threshold_tokens,
            excluded={*proxy.excluded_tools, *own_tools(app)},  # our answers are already bounded
        )
    )
    app.add_transform(CompactSchemas(own_tools(app)))  # the backend's own tools are listed as declared
    return app
