"""Turning a proxied tool result into records, the rows of a saved dataset.

A backend says nothing about the shape of its output, so the shape is read from the output:
- JSON holding an array is that array, one record per element: the array itself, or the
  largest array of objects found one or two levels down in an object (`{"rows": [...]}`,
  `{"results": {"matches": [...]}}`), which is how paged APIs and fastmcp's own
  `{"result": [...]}` wrapper return lists. Structured content is looked at first, then the
  text blocks (servers often send the JSON as text: the filesystem server's directory_tree).
- Anything else is text, one record per line (`{"line": 1, "text": "..."}`), so a log dump or
  a large file read can still be grepped with SQL.
Elements that are not objects become `{"value": ...}`, so every dataset is a table.

Only results made of text can be turned into rows; one holding an image, audio, a binary
resource or a link is passed through untouched by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import msgspec
from fastmcp.tools.base import ToolResult
from mcp_types import EmbeddedResource, TextContent, TextResourceContents

RecordFormat = Literal["json_records", "text_lines"]
#: How far below the top of a JSON object an array of records is looked for.
MAX_DEPTH = 2


@dataclass(frozen=True, slots=True)
class Extracted:
    """`records_from` says where the records were found: `text` or `structuredContent`, plus
    the key path of a nested array (`text:rows`). `envelope` is the object around a nested
    array, with the array replaced by a note, so the answer keeps e.g. a total or a cursor."""

    records: list[dict[str, Any]]
    format: RecordFormat
    records_from: str
    envelope: dict[str, Any] | None = None


def result_text(result: ToolResult) -> str | None:
    """The result's text blocks (and embedded text resources) joined by newlines, or None when
    it holds anything else."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, EmbeddedResource) and isinstance(block.resource, TextResourceContents):
            parts.append(block.resource.text)
        else:
            return None
    return "\n".join(parts)


def _rank(items: list[Any]) -> tuple[bool, int]:
    """Arrays of objects beat arrays of scalars; then the longer one wins."""
    return all(type(x) is dict for x in items), len(items)


def _find_array(value: Any, depth: int) -> tuple[list[Any], tuple[str, ...]] | None:
    """The best non-empty array in `value` (itself, or at most `depth` object levels down)."""
    if type(value) is list:
        return (value, ()) if value else None
    if type(value) is not dict or depth == 0:
        return None
    best: tuple[list[Any], tuple[str, ...]] | None = None
    for key, sub in value.items():
        found = _find_array(sub, depth - 1)
        if found is not None and (best is None or _rank(found[0]) > _rank(best[0])):
            best = (found[0], (str(key), *found[1]))
    return best


def _without(value: dict[str, Any], path: tuple[str, ...], count: int) -> dict[str, Any]:
    """A copy of `value` with the array at `path` replaced by a note saying where it went."""
    head, *rest = path
    out = dict(value)
    out[head] = _without(value[head], tuple(rest), count) if rest else f"<{count} records: saved in the dataset>"
    return out


def _from_json(value: Any, where: str) -> Extracted | None:
    found = _find_array(value, MAX_DEPTH)
    if found is None:
        return None
    items, path = found
    records = [x if type(x) is dict else {"value": x} for x in items]
    if not path:
        return Extracted(records, "json_records", where)
    return Extracted(records, "json_records", f"{where}:{'.'.join(path)}", _without(value, path, len(records)))


def _parse(text: str) -> Any:
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return None


def extract_records(result: ToolResult) -> Extracted | None:
    """The records to save for `result`, or None if it holds non-text content."""
    text = result_text(result)
    if text is None:
        return None
    if result.structured_content is not None:
        found = _from_json(result.structured_content, "structuredContent")
        if found is not None:
            return found
    found = _from_json(_parse(text), "text") if text.lstrip()[:1] in ("[", "{") else None
    if found is not None:
        return found
    if not text and result.structured_content is not None:
        text = msgspec.json.format(msgspec.json.encode(result.structured_content), indent=1).decode()
    lines = [{"line": i, "text": line} for i, line in enumerate(text.splitlines(), 1)]
    return Extracted(lines, "text_lines", "text")
