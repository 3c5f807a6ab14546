"""How big a tool result is for the agent, in bytes: the output layer's estimate for text we
cannot see (`server.output.BYTES_PER_TOKEN`) turns them into tokens. The same measure sizes
everything the proxy answers itself: its compact answers and its own tools' pages.
"""

from __future__ import annotations

import pydantic_core
from fastmcp.tools.base import ToolResult
from mcp_types import TextContent

from server.output import dumps_bytes


def _text_bytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def structured_json(result: ToolResult) -> bytes | None:
    """The structured content as JSON (None without any), to measure and to extract records from
    without serializing it twice."""
    return dumps_bytes(result.structured_content) if result.structured_content is not None else None


def part_sizes(result: ToolResult, structured: bytes | None = None) -> tuple[int, int]:
    """(bytes of the content blocks, bytes of the structured content's JSON, `structured` when
    given). Text is measured, not serialized: escaping it to JSON would cost more than the rest
    of a pass-through and say nothing about tokens; other blocks count as their JSON."""
    content = 0
    for block in result.content:
        if isinstance(block, TextContent):
            content += _text_bytes(block.text)
        else:
            content += len(pydantic_core.to_json(block, exclude_none=True, by_alias=True))
    if structured is None:
        structured = structured_json(result)
    return content, len(structured or b"")


def wire_size(result: ToolResult, structured: bytes | None = None) -> int:
    """What the agent is handed: the larger of the content and the structured content. Clients
    show one or the other, and a server (fastmcp, for one) usually sends the same JSON in both,
    so adding them would count one result twice."""
    return max(part_sizes(result, structured))


def sent_size(result: ToolResult) -> int:
    """Content and structured content together: the bound for the proxy's own answers, which
    are sent in both, whichever a client shows (or both, if it shows both)."""
    return sum(part_sizes(result))
