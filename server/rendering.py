"""From a rendered page to an MCP `ToolResult`: the seam between the tools and the output layer.

The output layer decides *what* to answer (inline, file_ref, legacy, stats, cut to fit); this
module decides how it travels: structuredContent plus a text block with the same JSON, and a
resource_link block when the page went to a file, so clients without shell access can read it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fastmcp.tools.base import ToolResult
from mcp_types import ResourceLink, TextContent

from server.output import OutputLayer, PageView, Rendered, RenderOptions

JSONL_MIME = "application/x-ndjson"


@dataclass(frozen=True)
class OutputOptions:
    """The presentation arguments every search tool accepts."""

    output_mode: str = "auto"
    max_output_tokens: int | None = None
    stats_only: bool = False
    stats_first: bool = False


def json_result(payload: dict[str, Any], *, is_error: bool = False) -> ToolResult:
    """structuredContent and a text block carrying the same JSON (clients differ in which they show)."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return ToolResult(content=[TextContent(type="text", text=text)], structured_content=payload, is_error=is_error)


def tool_result(rendered: Rendered) -> ToolResult:
    content: list[Any] = [TextContent(type="text", text=rendered.text)]
    if rendered.file_ref is not None:
        ref = rendered.file_ref
        content.append(
            ResourceLink(
                type="resource_link",
                uri=ref.uri,
                name=ref.name,
                description=f"{ref.line_count - 1} result lines after a header line (JSONL)",
                mime_type=JSONL_MIME,
                size=ref.size_bytes,
            )
        )
    if rendered.structured is None:  # legacy: a bare array, which structuredContent cannot carry
        return ToolResult(content=content)
    return ToolResult(content=content, structured_content=rendered.structured)


class Renderer:
    def __init__(self, layer: OutputLayer) -> None:
        self.layer = layer

    def render(self, page: PageView, options: OutputOptions, *, tool: str, query: str, records_key: str = "matches") -> ToolResult:
        render_options = RenderOptions(
            tool=tool,
            query=query,
            output_mode=options.output_mode,
            max_output_tokens=options.max_output_tokens,
            stats_only=options.stats_only,
            stats_first=options.stats_first,
            records_key=records_key,
        )
        return tool_result(self.layer.render(page, render_options))
