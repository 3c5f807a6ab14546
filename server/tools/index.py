"""`index_status` and `reindex`: let an agent see and drive the semantic index of a root."""

import contextlib
from typing import Annotated, Any

from fastmcp import Context, FastMCP
from fastmcp.tools.base import ToolResult
from pydantic import Field

from search_engine import IndexNotReadyError, resolve_search_path
from server.background_indexer import RootState
from server.json_result import json_result
from server.services import Services
from server.tools.bounds import PathText
from server.tools.descriptions import READ_ONLY, local_writes
from server.tools.registry import mcp_tool
from server.tools.schemas import INDEX_OUTPUT

PathArg = Annotated[PathText | None, Field(description="a root or a path in one (default: first root)")]


def register_index_tools(app: FastMCP, services: Services) -> None:
    indexes = services.engine.indexes  # made now: an unsafe cache dir refuses the server's start

    def status(root: Any, state: RootState) -> dict[str, Any]:
        s = indexes.status(root)
        return {
            "root": s.root,
            "exists": s.exists,
            "files": s.files,
            "chunks": s.chunks,
            "generation": s.generation,
            "model": s.model_id or s.configured_model_id,
            "size_bytes": s.size_bytes,
            "updated_at": s.updated_at,
            "stale_reason": s.stale_reason,
            "change_detection": s.change_detection,
            "change_detection_reason": s.change_detection_reason,
            "building": state.building,
            "progress": {"phase": state.phase, "done": state.done, "total": state.total, "percent": state.percent()},
            "error": str(state.error) if state.error else None,
            "warnings": s.warnings,
        }

    @mcp_tool(
        app,
        "index_status",
        "Files, chunks, model and build progress of a root's semantic index.",
        annotations=READ_ONLY,
        output_schema=INDEX_OUTPUT,
    )
    async def index_status(path: PathArg = None) -> ToolResult:
        root = resolve_search_path(path, services.roots).root
        return json_result(status(root, services.indexer.state(root)))

    @mcp_tool(
        app,
        "reindex",
        "Update a root's semantic index; returns index_status.",
        annotations=local_writes(destructive=False),
        output_schema=INDEX_OUTPUT,
    )
    async def reindex(
        ctx: Context,
        path: PathArg = None,
        full: Annotated[bool, Field(description="rebuild from scratch")] = False,
    ) -> ToolResult:
        root = resolve_search_path(path, services.roots).root
        state = services.indexer.request(root, refresh=True, full=full)
        with contextlib.suppress(IndexNotReadyError):  # still building: the status below says how far
            await services.indexer.wait(state, ctx)  # (a failure raises through)
        return json_result(status(root, state))
