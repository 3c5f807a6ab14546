"""What the proxy passes on unsaved is bounded too: a backend's error and its `_meta`.

The proxy saves a result over its threshold as a dataset, and used to pass everything else on
exactly as the backend sent it. That let a backend put 20 MiB before the agent in what the
threshold does not measure: an `isError` result (an error is the backend's message, never
saved) and `_meta` (the result's and each content block's, which no size counted). So:

- an error's text is clipped to `MAX_ERROR_CHARS`, as DuckDB's are, its structured content kept
  only when small and its non-text blocks left out, each cut said in the text;
- `_meta` is passed on while all of it together is at most `MAX_META_BYTES` of JSON; one that
  does not fit is left out, and the result's own `_meta` says how much was (`META_LEFT_OUT`).

Non-text content (an image, audio, a binary resource) is measured like the rest and, over the
threshold, saved as a dataset of its blocks (`server.proxy.extraction`).

A result within these bounds is passed on untouched, the same object.
"""

from __future__ import annotations

import logging
from typing import Any

from fastmcp.tools.base import ToolResult
from mcp_types import TextContent

from server.errors import MAX_ERROR_CHARS
from server.output import clip_strings, dumps_bytes

log = logging.getLogger(__name__)

#: The `_meta` of a result and of its content blocks, together, in bytes of JSON.
MAX_META_BYTES = 64 * 1024
#: An error's structured content is kept up to this many bytes of JSON (after clipping its
#: strings): a structured error is a code and a message, not data.
MAX_ERROR_STRUCTURED_BYTES = 4 * MAX_ERROR_CHARS
#: The key of the result's `_meta` saying how much of the backend's was left out.
META_LEFT_OUT = "codepager/meta_left_out"


def bounded(result: ToolResult, tool: str) -> ToolResult:
    """`result` of the backend's tool `tool`, with its error and its `_meta` within bounds."""
    return _bounded_meta(_bounded_error(result, tool) if result.is_error else result, tool)


def _bounded_error(result: ToolResult, tool: str) -> ToolResult:
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    text = "\n".join(texts)
    cuts = []
    if len(result.content) > len(texts):
        cuts.append(f"{len(result.content) - len(texts):,} content blocks that are not text")
    structured = result.structured_content
    if structured is not None:
        size = len(dumps_bytes(structured))  # measured before it is walked
        if size > MAX_ERROR_STRUCTURED_BYTES:
            cuts.append(f"structured content of {size:,} bytes")
            structured = None
        else:
            structured = clip_strings(structured, MAX_ERROR_CHARS)
    if len(text) <= MAX_ERROR_CHARS and not cuts and structured == result.structured_content:
        return result
    log.warning("clipped the error of %s (%s characters; %s)", tool, len(text), "; ".join(cuts) or "text only")
    note = f"\n[codepager proxy: {tool}'s error also held {' and '.join(cuts)}, left out]" if cuts else ""
    return ToolResult(
        content=[TextContent(type="text", text=clip_strings(text, MAX_ERROR_CHARS) + note)],
        structured_content=structured,
        meta=result.meta,
        is_error=True,
    )


def _bounded_meta(result: ToolResult, tool: str) -> ToolResult:
    """`result` with each `_meta` (the result's first, then its blocks' in order) kept while
    they fit in `MAX_META_BYTES` together; one is measured once, by a C serializer."""
    left = MAX_META_BYTES
    dropped = 0

    def fits(meta: dict[str, Any] | None) -> bool:
        nonlocal left, dropped
        size = len(dumps_bytes(meta)) if meta else 0
        if size <= left:
            left -= size
            return True
        dropped += size
        return False

    meta_fits = fits(result.meta)
    blocks_fit = [fits(block.meta) for block in result.content]
    if not dropped:
        return result
    log.warning("left out %s bytes of the _meta of %s's result (over %s)", dropped, tool, MAX_META_BYTES)
    content = [
        block if keep else block.model_copy(update={"meta": None})
        for block, keep in zip(result.content, blocks_fit, strict=True)
    ]
    note = {META_LEFT_OUT: f"{dropped:,} bytes of the backend's _meta, over the proxy's {MAX_META_BYTES:,}"}
    meta = {**(result.meta if meta_fits and result.meta else {}), **note}
    return result.model_copy(update={"content": content, "meta": meta})
