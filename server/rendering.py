"""Turning a `SearchResponse` into a `ToolResult`: the seam between the search tools and the
output layer (inline / file_ref / legacy, size ceilings, stats, offload)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fastmcp.tools.base import ToolResult
from mcp_types import TextContent

from server.response import SearchResponse


@dataclass(frozen=True)
class OutputOptions:
    output_mode: str = "auto"
    max_output_tokens: int | None = None
    stats_only: bool = False
    stats_first: bool = False


def json_result(payload: dict[str, Any], *, is_error: bool = False) -> ToolResult:
    """structuredContent and a text block carrying the same JSON (clients differ in which they show)."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return ToolResult(content=[TextContent(type="text", text=text)], structured_content=payload, is_error=is_error)


class Renderer:
    def render(self, response: SearchResponse, options: OutputOptions, *, tool: str) -> ToolResult:
        return json_result(response.inline())
