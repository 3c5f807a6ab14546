"""A backend's malformed answer is the backend's fault, and the agent is told so.

When a backend answers a call with something that is not an MCP tool result (`{"content": 5}`),
the client session validating it raises pydantic's ValidationError, and fastmcp answers the
agent JSON-RPC -32602 "Invalid request parameters": the agent is told to fix arguments that
were fine. This middleware answers such a call with an `isError` result instead, naming the
backend and what was wrong with its answer (`backend_result_invalid`).
"""

from __future__ import annotations

from typing import Any

import mcp_types as mt
import pydantic
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools.base import ToolResult

from server.errors import BackendResultError, error_result
from server.proxy.backends import ToolOwners
from server.validation_problems import validation_problems


class BackendResultErrors(Middleware):
    """fastmcp middleware on the proxy app: a backend tool's malformed result becomes a tool error."""

    def __init__(self, owners: ToolOwners) -> None:
        self.owners = owners

    async def on_call_tool(
        self,
        context: MiddlewareContext[mt.CallToolRequestParams],
        call_next: CallNext[mt.CallToolRequestParams, ToolResult],
    ) -> Any:
        try:
            return await call_next(context)
        except pydantic.ValidationError as exc:
            owner = self.owners.owner(context.message.name)
            if owner is None:  # not a backend's tool: the proxy's own validation, as it was
                raise
            problems = "; ".join(validation_problems(exc, shown=lambda _: False)[:5])
            server, tool = owner
            return error_result(
                BackendResultError(
                    f"{server}'s tool {tool} answered with something that is not a tool result: {problems}"
                )
            )
