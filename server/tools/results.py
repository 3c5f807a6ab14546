"""Tools and resources over saved results: read offloaded pages over MCP, query any dataset with
SQL and list them. Shared by the search server and the proxy (which registers the SQL tools over
its own datasets too).

Deleting them is not a tool: the store's sweep expires every file after `offload.retention_hours`
on its own, and an agent has no better idea of when a file is no longer wanted (a tool that
deletes files, in every conversation's tool list, would only invite it to guess)."""

import contextlib
import logging
import re
import sys
from collections.abc import Iterator
from typing import Annotated

import anyio
from fastmcp import FastMCP
from fastmcp.exceptions import ValidationError
from fastmcp.tools.base import ToolResult
from pydantic import Field, WithJsonSchema

from server.errors import DatasetNotFoundError, InvalidDatasetIdError, LineRangeError, ReadTooLargeError
from server.json_result import json_result
from server.output import LINES_URI, RESULTS_URI, Layout, OffloadStore, OutputLayer, OutputMode, PageOptions
from server.rendering import tool_result
from server.sql import DatasetFilter, Datasets, answer_query
from server.tools.bounds import LongText, PathText
from server.tools.descriptions import ANALYZE_DESCRIPTION, READ_ONLY, OutputModeName
from server.tools.registry import mcp_tool
from server.tools.schemas import DATASETS_OUTPUT, ROWS_OUTPUT

_LINE_NUMBER = re.compile(r"[0-9]+")


@contextlib.contextmanager
def _resource_errors() -> Iterator[None]:
    """A bad or unknown result id, a bad line range or a read over the page ceiling, as
    JSON-RPC -32602 with our message (a resource has no isError result): fastmcp would report
    any other exception as an internal error (-32603), logged with a traceback."""
    try:
        yield
    except (InvalidDatasetIdError, DatasetNotFoundError, LineRangeError, ReadTooLargeError) as exc:
        raise ValidationError(str(exc), log_level=logging.DEBUG) from None


def _line_number(text: str) -> int:
    """A line number of a lines URI. Read here, not by fastmcp's `int` coercion, which takes
    `+1`, `1_000` or non-ASCII digits and answers `abc` (or 5,000 digits, over Python's int parsing limit)
    with an internal error. A number past any file's end reads as the largest one."""
    if not _LINE_NUMBER.fullmatch(text):
        raise LineRangeError(f"invalid line number {text!r}: use codepager://results/ID/lines/START-END, e.g. 1-50")
    digits = text.lstrip("0") or "0"
    return int(digits) if len(digits) < len(str(sys.maxsize)) else sys.maxsize


def register_results_resources(app: FastMCP, store: OffloadStore) -> None:
    @app.resource(
        RESULTS_URI,
        name="offloaded-results",
        mime_type="application/x-ndjson",
        description="A whole offloaded page in one read (line 1 a header, then one match per line): "
        "a large page reads better in parts, through offloaded-results-lines.",
    )
    def whole(id: str) -> str:
        with _resource_errors():
            return store.read_whole(id)

    @app.resource(
        LINES_URI,
        name="offloaded-results-lines",
        mime_type="application/x-ndjson",
        description="Lines start..end (1-based, inclusive; line 1 is the header) of an offloaded page.",
    )
    def lines(id: str, start: str, end: str) -> str:
        with _resource_errors():
            return store.read_lines(id, _line_number(start), _line_number(end))


def register_sql_tools(app: FastMCP, datasets: Datasets, layer: OutputLayer) -> None:
    @mcp_tool(app, "analyze-with-duckdb", ANALYZE_DESCRIPTION, annotations=READ_ONLY, output_schema=ROWS_OUTPUT)
    async def analyze_with_duckdb(
        query: Annotated[LongText, Field(description="one read-only statement")],
        dataset_id: Annotated[PathText | None, Field(description="that dataset is also the view `dataset`")] = None,
        output_mode: Annotated[
            OutputModeName, Field(description="auto: too big -> file (results.file_ref); inline: cut")
        ] = "auto",
    ) -> ToolResult:
        options = PageOptions(output_mode=OutputMode(output_mode))
        layout = Layout(tool="analyze-with-duckdb", query=query, records_key="rows")
        rendered = await anyio.to_thread.run_sync(
            lambda: answer_query(datasets, layer, query, dataset_id, options, layout)
        )
        return tool_result(rendered)

    @mcp_tool(
        app,
        "list-saved-datasets",
        "Saved datasets, newest first.",
        annotations=READ_ONLY,
        output_schema=DATASETS_OUTPUT,
    )
    async def list_saved_datasets(
        filter: Annotated[
            PathText | DatasetFilter | None,
            # Declared without DatasetFilter's own schema (a $defs block longer than the tool):
            # the description names its fields, and the arguments are still validated by it.
            WithJsonSchema(
                {"type": ["string", "object"], "description": "text, or {tool, server, date_from, date_to}"}
            ),
        ] = None,
    ) -> ToolResult:
        infos = await anyio.to_thread.run_sync(lambda: datasets.infos(filter))
        return json_result({"datasets": [i.to_dict() for i in infos], "count": len(infos)})
