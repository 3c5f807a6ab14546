"""How every codepager tool is registered: a fastmcp tool over `tool_errors`.

One decorator instead of the pair `@app.tool(...)` / `@tool_errors` on each tool, so no tool can
be registered without the error mapping (cursor refusals as -32602, known failures as `isError`
results) and the options every tool states (annotations, output schema) are named in one place.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastmcp import FastMCP
from fastmcp.tools.base import ToolResult
from mcp_types import ToolAnnotations

from server.errors import tool_errors

ToolBody = Callable[..., Awaitable[ToolResult]]


def mcp_tool(
    app: FastMCP,
    name: str,
    description: str,
    *,
    annotations: ToolAnnotations,
    output_schema: dict[str, Any],
    meta: dict[str, Any] | None = None,
) -> Callable[[ToolBody], ToolBody]:
    """Register the decorated function as tool `name` on `app`, its body wrapped in `tool_errors`.
    fastmcp builds the input schema from the function's own signature, unchanged by the wrapper."""

    def register(fn: ToolBody) -> ToolBody:
        return app.tool(
            name=name, description=description, annotations=annotations, output_schema=output_schema, meta=meta
        )(tool_errors(fn))

    return register
