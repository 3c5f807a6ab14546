"""The proxy's one intervention: results over the threshold become datasets, nothing else changes.

A result's size is the output layer's token estimate of what the agent is handed
(`size.wire_size`: the larger of the content and the structured content, which fastmcp
backends fill with the same JSON, so it is not counted twice). Under the threshold, an error
result, an excluded tool or one of the proxy's own tools goes through as the backend sent it:
content, structuredContent, isError and _meta, once a backend's error and _meta are within the
bounds of `server.proxy.passthrough`.

A backend tool that may be intercepted is listed without its output schema: MCP clients check
structuredContent against a declared schema, which the proxy's answer cannot match. (Widening
the schema with `anyOf` was tried: it hides top-level markers such as fastmcp's
`x-fastmcp-wrap-result` that clients key their parsing on, so untouched results then failed
to parse. fastmcp's own response-limiting middleware drops the schema for the same reason.)
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import anyio
import mcp_types as mt
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools.base import InputRequiredToolResult, Tool, ToolResult

from server.proxy.backends import ToolOwners
from server.proxy.extraction import extract_records
from server.proxy.passthrough import bounded
from server.proxy.saver import ProxiedCall, ResultSaver
from server.proxy.size import structured_json, wire_size


class LargeResultInterceptor(Middleware):
    """fastmcp middleware on the proxy app: saves backend results over `threshold_tokens`."""

    def __init__(
        self, saver: ResultSaver, owners: ToolOwners, *, threshold_tokens: int, excluded: Collection[str]
    ) -> None:
        self.saver = saver
        self.owners = owners
        self.threshold_tokens = threshold_tokens
        self.excluded = frozenset(excluded)

    def _owner(self, tool: str) -> tuple[str, str] | None:
        """(server, backend tool) when calls to `tool` may be intercepted. An excluded tool may
        be named as the client sees it or as its backend does."""
        owner = self.owners.owner(tool)
        if owner is None or tool in self.excluded or owner[1] in self.excluded:
            return None
        return owner

    async def on_list_tools(
        self, context: MiddlewareContext[mt.ListToolsRequest], call_next: CallNext[mt.ListToolsRequest, Sequence[Tool]]
    ) -> Sequence[Tool]:
        tools = await call_next(context)
        return [
            t.model_copy(update={"output_schema": None})
            if t.output_schema is not None and self._owner(t.name) is not None
            else t
            for t in tools
        ]

    async def on_call_tool(
        self,
        context: MiddlewareContext[mt.CallToolRequestParams],
        call_next: CallNext[mt.CallToolRequestParams, ToolResult],
    ) -> Any:
        result = await call_next(context)
        # A multi-round-trip ask or a task acknowledgement carries no content to save; an error
        # is the backend's message to the agent and goes through, clipped (`bounded`).
        if not isinstance(result, ToolResult) or isinstance(result, InputRequiredToolResult):
            return result
        backend = self.owners.owner(context.message.name)
        if backend is None:  # one of the proxy's own tools: bounded already
            return result
        result = bounded(result, backend[1])
        owner = self._owner(context.message.name)
        if owner is None or result.is_error:
            return result
        structured = structured_json(result)  # serialized once: measured here, split into records below
        size = wire_size(result, structured)
        if size.tokens <= self.threshold_tokens:
            return result
        extracted = await anyio.to_thread.run_sync(extract_records, result, structured)
        call = ProxiedCall(tool=owner[1], server=owner[0], arguments=dict(context.message.arguments or {}), size=size)
        return await anyio.to_thread.run_sync(self.saver.save, result, extracted, call)
