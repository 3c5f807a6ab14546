"""From a rendered page to an MCP `ToolResult`: the seam between the tools and the output layer.

The output layer decides *what* to answer (inline, file_ref, legacy, stats, cut to fit); this
module decides how it travels: structuredContent, a text block (for search pages the grep-like
rendering of `server.page_text`, sized for the client; for other answers the same JSON), and a
resource_link block when the page went to a file, so clients without shell access can read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastmcp.tools.base import ToolResult
from mcp_types import ResourceLink, TextContent

from server.clients import ClientProfile
from server.output import JSONL_MIME_TYPE, OutputLayer, OutputMode, PageView, Rendered, RenderOptions
from server.page_text import page_text
from server.records import Detail, group_by_file
from server.response import SearchResponse


@dataclass(frozen=True)
class OutputOptions:
    """The presentation arguments every search tool accepts."""

    output_mode: str = "auto"
    max_output_tokens: int | None = None
    stats_only: bool = False
    stats_first: bool = False


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


class Renderer:
    def __init__(self, layer: OutputLayer) -> None:
        self.layer = layer

    def render(
        self,
        page: PageView,
        options: OutputOptions,
        *,
        tool: str,
        query: str,
        records_key: str = "matches",
        client: ClientProfile | None = None,
        **presentation: Any,
    ) -> ToolResult:
        """`page` as a ToolResult; `presentation` is passed on to `RenderOptions` (`present`, `text`)."""
        render_options = RenderOptions(
            tool=tool,
            query=query,
            output_mode=OutputMode.parse(options.output_mode),
            max_output_tokens=options.max_output_tokens,
            stats_only=options.stats_only,
            stats_first=options.stats_first,
            records_key=records_key,
            ceiling=client.ceiling if client is not None else None,
            **presentation,
        )
        return tool_result(self.layer.render(page, render_options))

    def render_search(
        self, response: SearchResponse, options: OutputOptions, *, tool: str, client: ClientProfile
    ) -> ToolResult:
        """A search page: compact pages group their records by file; the text block is grep's
        layout (the header alone for a client that shows only structuredContent); the page is
        cut to what `client` shows."""
        compact = response.options.detail is Detail.COMPACT
        return self.render(
            response,
            options,
            tool=tool,
            query=response.page.request.query,
            records_key="files" if compact else "matches",
            client=client,
            present=group_by_file if compact else None,
            uncut=frozenset({"path", "file"}),
            text=lambda answer: page_text(tool, answer, with_matches=client.shows_text),
        )
