"""Reading a tool result where a test or benchmark knows its shape: typed accessors that fail
with what was found instead, so a wrong guess is an assertion, not an AttributeError later."""

from __future__ import annotations

from typing import Any

from mcp_types import TextContent


def text_of(block: object) -> str:
    """The text of a content block that must be a text block."""
    assert isinstance(block, TextContent), f"expected a text block, got {type(block).__name__}"
    return block.text


def structured_of(content: dict[str, Any] | None) -> dict[str, Any]:
    """A result's structured content, which must be there."""
    assert content is not None, "the result has no structured content"
    return content
