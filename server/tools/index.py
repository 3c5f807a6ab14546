"""`index_status` and `reindex`: let an agent see and drive the semantic index of a root, or of
every root at once.

With no `path` they cover every root a search with no `path` covers (before, only the first
root, and the answer did not say the others were left out): one root answers with its status,
several with `roots`, a status each, and `building` true while any is built."""

import contextlib
from pathlib import Path
from typing import Annotated, Any

from fastmcp import Context, FastMCP
from fastmcp.tools.base import ToolResult
from pydantic import Field

from search_engine import IndexNotReadyError, resolve_search_path, searched_roots
from server.background_indexer import RootState
from server.json_result import json_result
from server.services import Services
from server.tools.bounds import PathText
from server.tools.descriptions import LOCAL_WRITES, READ_ONLY
from server.tools.registry import mcp_tool
from server.tools.schemas import INDEX_OUTPUT

PathArg = Annotated[PathText | None, Field(description="a root or a path in one (default: each root)")]


def register_index_tools(app: FastMCP, services: Services) -> None:
    services.engine.check_index_cache()  # now: an unsafe cache dir refuses the server's start

    def roots_of(path: str | None) -> list[Path]:
        """The root `path` lies in, or with no `path` every root a search covers."""
        return searched_roots(services.roots) if path is None else [resolve_search_path(path, services.roots).root]

    def status(root: Path, state: RootState) -> dict[str, Any]:
        s = services.engine.index_status(root)
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

    def answer(states: dict[Path, RootState]) -> ToolResult:
        """One root's status, or every root's under `roots`."""
        each = [status(root, state) for root, state in states.items()]
        if len(each) == 1:
            return json_result(each[0])
        return json_result({"roots": each, "building": any(s["building"] for s in each)})

    @mcp_tool(
        app,
        "index_status",
        "Files, chunks, model and build progress of each root's semantic index.",
        annotations=READ_ONLY,
        output_schema=INDEX_OUTPUT,
    )
    async def index_status(path: PathArg = None) -> ToolResult:
        return answer({root: services.indexer.state(root) for root in roots_of(path)})

    @mcp_tool(
        app,
        "reindex",
        "Update each root's semantic index; returns index_status.",
        annotations=LOCAL_WRITES,
        output_schema=INDEX_OUTPUT,
    )
    async def reindex(
        ctx: Context,
        path: PathArg = None,
        full: Annotated[bool, Field(description="rebuild from scratch")] = False,
    ) -> ToolResult:
        states = {root: services.indexer.request(root, refresh=True, full=full) for root in roots_of(path)}
        with contextlib.suppress(IndexNotReadyError):  # still building: the status below says how far
            await services.indexer.wait(states, ctx)  # (a failure raises through)
        return answer(states)
