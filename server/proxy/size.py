"""How big a tool result is for the agent: its bytes (what the answers report) and its tokens
by the output layer's one estimate (`server.output.estimate_tokens`, what every threshold is
compared with). The same measure sizes everything the proxy answers itself: its compact
answers and its own tools' pages.
"""

from __future__ import annotations

from dataclasses import dataclass

import pydantic_core
from fastmcp.tools.base import ToolResult
from mcp_types import TextContent

from server.output import byte_size, dumps_bytes, estimate_tokens


@dataclass(frozen=True, slots=True)
class Size:
    """The bytes of some output and its estimated tokens."""

    bytes: int
    tokens: int

    def __add__(self, other: Size) -> Size:
        return Size(self.bytes + other.bytes, self.tokens + other.tokens)


_NOTHING = Size(0, 0)


def structured_json(result: ToolResult) -> bytes | None:
    """The structured content as JSON (None without any), to measure and to extract records from
    without serializing it twice."""
    return dumps_bytes(result.structured_content) if result.structured_content is not None else None


def part_sizes(result: ToolResult, structured: bytes | None = None) -> tuple[Size, Size]:
    """(size of the content blocks, size of the structured content's JSON, `structured` when
    given). Text is measured, not serialized: escaping it to JSON would cost more than the rest
    of a pass-through and say nothing about tokens; other blocks count as their JSON."""
    content = _NOTHING
    for block in result.content:
        if isinstance(block, TextContent):
            content += Size(byte_size(block.text), estimate_tokens(block.text))
        else:
            raw = pydantic_core.to_json(block, exclude_none=True, by_alias=True)
            content += Size(len(raw), estimate_tokens(raw))
    if structured is None:
        structured = structured_json(result)
    return content, Size(len(structured), estimate_tokens(structured)) if structured is not None else _NOTHING


def wire_size(result: ToolResult, structured: bytes | None = None) -> Size:
    """What the agent is handed: the larger (in tokens) of the content and the structured
    content. Clients show one or the other, and a server (fastmcp, for one) usually sends the
    same JSON in both, so adding them would count one result twice."""
    return max(part_sizes(result, structured), key=lambda size: size.tokens)


def sent_size(result: ToolResult) -> Size:
    """Content and structured content together: the bound for the proxy's own answers, which
    are sent in both, whichever a client shows (or both, if it shows both)."""
    content, structured = part_sizes(result)
    return content + structured
