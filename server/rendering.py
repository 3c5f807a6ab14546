"""From a rendered page to an MCP `ToolResult`: the seam between the tools and the output layer.

The output layer decides *what* to answer (inline, file_ref, legacy, stats, cut to fit); this
module decides how it travels: structuredContent, a text block (for search pages the grep-like
rendering of `server.page_text`, sized for the client; for other answers the same JSON), and a
resource_link block when the page went to a file, so clients without shell access can read it.
"""

from __future__ import annotations

from typing import Any

from fastmcp.tools.base import ToolResult
from mcp_types import ResourceLink, TextContent

from server.clients import ClientProfile
from server.output import JSONL_MIME_TYPE, Layout, OutputLayer, Rendered
from server.page_text import page_text
from server.records import group_by_file
from server.response import SearchResponse


def tool_result(rendered: Rendered) -> ToolResult:
    content: list[Any] = [TextContent(type="text", text=rendered.text)]
    if rendered.file_ref is not None:
        ref = rendered.file_ref
        content.append(
            ResourceLink(
                type="resource_link",
                uri=ref.uri,
                name=ref.name,
                description=f"{ref.line_count - 1} result lines after a header line (JSONL): read them in parts, "
                "as results.file_ref.guidance says",
                mime_type=JSONL_MIME_TYPE,
                size=ref.size_bytes,
            )
        )
    return ToolResult(content=content, structured_content=rendered.structured)


def render_search(layer: OutputLayer, response: SearchResponse, *, tool: str, client: ClientProfile) -> ToolResult:
    """A search page, rendered with the options it carries: compact pages group their records by
    file; the text block is grep's layout (the header alone for a client that shows only
    structuredContent); the page is cut to what `client` shows."""
    compact = response.compact
    layout = Layout(
        tool=tool,
        query=response.page.request.query,
        records_key="files" if compact else "matches",
        present=group_by_file if compact else None,
        text=lambda answer: page_text(tool, answer, with_matches=client.shows_text),
        ceiling=client.ceiling,
        uncut=frozenset({"path", "file"}),
    )
    return tool_result(layer.render(response, response.options, layout))
