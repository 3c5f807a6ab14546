"""How every codepager tool is registered: a fastmcp tool over `tool_errors`.

One decorator instead of the pair `@app.tool(...)` / `@tool_errors` on each tool, so no tool can
be registered without the error mapping (cursor refusals as -32602, known failures as `isError`
results) and the options every tool states (annotations, output schema) are named in one place.
It also records which tools an app defines itself (`own_tools`), so the listing transform and
the proxy's interception know them without a hand-kept list of names to fall out of step.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from fastmcp import FastMCP
from fastmcp.tools.base import ToolResult
from mcp_types import ToolAnnotations

from server.errors import tool_errors

ToolBody = Callable[..., Awaitable[ToolResult]]

_OWN: weakref.WeakKeyDictionary[FastMCP, list[str]] = weakref.WeakKeyDictionary()


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
        _OWN.setdefault(app, []).append(name)
        return app.tool(
            name=name, description=description, annotations=annotations, output_schema=output_schema, meta=meta
        )(tool_errors(fn))

    return register


def own_tools(app: FastMCP) -> tuple[str, ...]:
    """The names of the tools registered on `app` by `mcp_tool`, in registration order."""
    return tuple(_OWN.get(app, ()))
