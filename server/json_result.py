"""A tool result carrying one JSON object: as structuredContent, and as the same JSON, compact,
in a text block, since clients differ in which of the two they show (Claude Code the first,
Cursor the second). Every such result is made here, error results included, so that both
copies always agree and are written alike."""

from __future__ import annotations

import json
from typing import Any

from fastmcp.tools.base import ToolResult
from mcp_types import TextContent


def json_result(payload: dict[str, Any], *, is_error: bool = False) -> ToolResult:
    """`payload` as structuredContent and as compact JSON text (non-ASCII unescaped)."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return ToolResult(content=[TextContent(type="text", text=text)], structured_content=payload, is_error=is_error)
