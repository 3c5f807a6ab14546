"""Tools and resources over saved results: read offloaded pages over MCP, query any dataset with
SQL, list and clean them up. Shared by the search server and the proxy (which registers the SQL
tools over its own datasets too, but not the cleanup of temp files)."""

from typing import Annotated

import anyio
from fastmcp import FastMCP
from fastmcp.tools.base import ToolResult
from mcp_types import ToolAnnotations
from pydantic import Field

from server.errors import tool_errors
from server.output import LINES_URI, RESULTS_URI, DatasetFilter, Datasets, OffloadStore, RenderOptions
from server.output.sql_answer import answer_query
from server.rendering import Renderer, json_result, tool_result

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


def register_results_resources(app: FastMCP, store: OffloadStore) -> None:
    @app.resource(RESULTS_URI, name="offloaded-results", mime_type="application/x-ndjson",
                  description="A whole offloaded page: line 1 is a header, then one match per line.")
    def whole(id: str) -> str:
        return store.read_whole(id)

    @app.resource(LINES_URI, name="offloaded-results-lines", mime_type="application/x-ndjson",
                  description="Lines start..end (1-based, inclusive; line 1 is the header) of an offloaded page.")
    def lines(id: str, start: int, end: int) -> str:
        return store.read_lines(id, start, end)


def register_results_tools(app: FastMCP, store: OffloadStore, datasets: Datasets, renderer: Renderer) -> None:
    register_sql_tools(app, datasets, renderer)
    register_cleanup_tool(app, store)


def register_sql_tools(app: FastMCP, datasets: Datasets, renderer: Renderer) -> None:
    @app.tool(
        name="analyze-with-duckdb",
        description=(
            "Read-only SQL (DuckDB) over saved datasets: offloaded results and saved tool results. "
            "Each is a view dataset_<id> (ids from results.file_ref.id, dataset.id or list-saved-datasets); with dataset_id "
            "it is also the view `dataset`. One SELECT/WITH/DESCRIBE/SUMMARIZE/SHOW/EXPLAIN "
            "statement per call. Rows come back paged like search results; a large result is "
            "written to a file (up to offload.duckdb_max_result_bytes; the answer says if rows were left out)."
        ),
        annotations=READ_ONLY,
    )
    @tool_errors
    async def analyze_with_duckdb(
        query: Annotated[str, Field(description="one read-only SQL statement")],
        dataset_id: Annotated[str | None, Field(description="make this dataset available as `dataset`")] = None,
        output_mode: Annotated[
            str,
            Field(pattern="^(auto|inline|file_ref|legacy)$", description="as for the search tools: auto, inline, file_ref or legacy"),
        ] = "auto",
    ) -> ToolResult:
        options = RenderOptions(tool="analyze-with-duckdb", query=query, output_mode=output_mode, records_key="rows")
        rendered = await anyio.to_thread.run_sync(lambda: answer_query(datasets, renderer.layer, query, dataset_id, options))
        return tool_result(rendered)

    @app.tool(
        name="list-saved-datasets",
        description="List saved datasets (id, view, tool, server, query, created, rows, size), newest first. "
        "`filter` is a text matched against id, tool, server and query, or an object narrowing by "
        "tool, server, date_from and date_to (ISO dates).",
        annotations=READ_ONLY,
    )
    @tool_errors
    async def list_saved_datasets(
        filter: Annotated[
            str | DatasetFilter | None,
            Field(description="text matched against id, tool, server and query, or an object of tool, server, date_from, date_to, text"),
        ] = None,
    ) -> ToolResult:
        infos = await anyio.to_thread.run_sync(lambda: datasets.list(filter))
        return json_result({"datasets": [i.to_dict() for i in infos], "count": len(infos)})


def register_cleanup_tool(app: FastMCP, store: OffloadStore) -> None:
    @app.tool(
        name="cleanup_temp_files",
        description="Delete offloaded result files older than max_age_days (default: the retention "
        "setting). Only codepager's own files in its output folder are ever touched.",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False),
    )
    @tool_errors
    async def cleanup_temp_files(
        max_age_days: Annotated[float | None, Field(ge=0, description="0 removes all of them")] = None,
    ) -> ToolResult:
        report = await anyio.to_thread.run_sync(lambda: store.cleanup(max_age_days))
        return json_result(report.to_dict())
