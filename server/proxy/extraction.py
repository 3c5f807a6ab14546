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

JSON text is never decoded in full: it is split into its elements as raw JSON (`msgspec.Raw`,
after one C pass removing newlines if it has any, so no record spans lines), which are
written out as they are.
Building Python objects for 50,000 records would cost more than everything else the proxy
does with them; the profile decodes only a sample and the few categorical fields.

JSON nested deeper than `MAX_NESTING` levels is kept as text lines instead: every reader of a
dataset walks JSON recursively (msgspec, the profile, DuckDB, which stops at 128 levels), so a
5,000-deep result split into records would fail somewhere after the split and be lost. Its depth
is measured without recursion, in C-speed passes over the bytes (`too_deep`).

A result holding anything but text (an image, audio, a binary resource, a link) is one record
per content block, as MCP sends it (an image's base64 `data` included) and numbered `block`: a
20 MiB image used to pass through whole, since only text could be turned into rows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgspec
import numpy as np
from fastmcp.tools.base import ToolResult
from mcp_types import EmbeddedResource, TextContent, TextResourceContents

from server.output import dumps_bytes
from server.records import records_of_groups

RecordFormat = Literal["json_records", "text_lines"]
#: How far below the top of a JSON object an array of records is looked for.
MAX_DEPTH = 2
#: Deeper JSON is saved as text lines: a record then stays readable by DuckDB (at most 128
#: levels, a wrapping `{"value": ...}` included) and by every recursive decoder on the way.
MAX_NESTING = 100
_OPEN_ARRAY, _OPEN_OBJECT = ord("["), ord("{")
_CONTAINER = list[msgspec.Raw] | dict[str, msgspec.Raw]
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
#: Bracket bytes as signed steps: 1 for an opening one, -1 (0xff as int8) for a closing one.
_STEPS = bytes(1 if b in b"[{" else 0xFF for b in range(256))
#: Steps summed per pass, bounding the temporary array (8 bytes a step).
_BLOCK = 1 << 20


def as_object(record: Any) -> Any:
    """A record as Python data; raw JSON (`msgspec.Raw`, how the proxy holds large results
    without building objects for them) is decoded."""
    return msgspec.json.decode(record) if type(record) is msgspec.Raw else record


@dataclass(frozen=True, slots=True)
class Extracted:
    """`records` are JSON objects, as Python dicts (from structured content) or raw JSON
    (from text). `records_from` says where they were found: `text` or `structuredContent`,
    plus the key path of a nested array (`text:rows`). `envelope` is the object around a
    nested array, with the array replaced by a note, so the answer keeps e.g. a total or a
    cursor."""

    records: Sequence[Any]
    format: RecordFormat
    records_from: str
    envelope: dict[str, Any] | None = None


def _deepest(data: bytes) -> int:
    """The deepest bracket nesting in `data`, strings not told apart: a running sum of steps."""
    steps = np.frombuffer(data.translate(_STEPS, _NOT_BRACKETS), np.int8)
    deepest = level = 0
    for start in range(0, len(steps), _BLOCK):
        running = steps[start : start + _BLOCK].cumsum(dtype=np.int64) + level
        deepest, level = max(deepest, int(running.max())), int(running[-1])
    return deepest


def too_deep(data: bytes) -> bool:
    """Whether the JSON text `data` nests arrays and objects deeper than `MAX_NESTING`, found
    without recursion. Brackets inside strings do not count, but removing strings costs a regex
    pass, so it is done only when counting every bracket says the text might be too deep."""
    return _deepest(data) > MAX_NESTING and _deepest(_STRING.sub(b"", data)) > MAX_NESTING


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


# Values below are either Python data (structured content) or compact raw JSON (text); these
# functions are all that tells them apart.


class _AnyObject(msgspec.Struct):
    """Matches any JSON object and decodes none of its fields."""


_ALL_OBJECTS = msgspec.json.Decoder(list[_AnyObject])


def _is_array(value: Any) -> bool:
    return type(value) is list or (type(value) is msgspec.Raw and memoryview(value)[0] == _OPEN_ARRAY)


def _is_object(value: Any) -> bool:
    return type(value) is dict or (type(value) is msgspec.Raw and memoryview(value)[0] == _OPEN_OBJECT)


def _open(value: Any) -> Any:
    """A container's elements (list) or members (dict), raw values staying raw."""
    return msgspec.json.decode(value, type=_CONTAINER) if type(value) is msgspec.Raw else value


def _only_objects(array: Any) -> bool:
    """Whether every element of `array` is an object; one C pass for raw JSON."""
    if type(array) is list:
        return all(type(x) is dict for x in array)
    try:
        _ALL_OBJECTS.decode(array)
    except msgspec.ValidationError:
        return False
    return True


def _as_record(item: Any) -> Any:
    if _is_object(item):
        return item
    if type(item) is msgspec.Raw:
        return msgspec.Raw(b'{"value":' + bytes(item) + b"}")
    return {"value": item}


@dataclass(frozen=True, slots=True)
class _Array:
    items: list[Any]
    path: tuple[str, ...]
    objects: bool

    def rank(self) -> tuple[bool, int]:
        """Arrays of objects beat arrays of scalars; then the longer one wins."""
        return self.objects, len(self.items)


def _find_array(value: Any, depth: int) -> _Array | None:
    """The best non-empty array in `value` (itself, or at most `depth` object levels down)."""
    if _is_array(value):
        items = _open(value)
        return _Array(items, (), _only_objects(value)) if items else None
    if not _is_object(value) or depth == 0:
        return None
    best: _Array | None = None
    for key, sub in _open(value).items():
        found = _find_array(sub, depth - 1)
        if found is not None and (best is None or found.rank() > best.rank()):
            best = _Array(found.items, (str(key), *found.path), found.objects)
    return best


def _envelope(value: Any, path: tuple[str, ...], count: int) -> dict[str, Any]:
    """`value` as Python data, with the array at `path` replaced by a note saying where it went."""
    head, *rest = path
    members = _open(value)
    out = {k: as_object(v) for k, v in members.items() if k != head}
    out[head] = _envelope(members[head], tuple(rest), count) if rest else f"<{count} records: saved in the dataset>"
    return {k: out[k] for k in members}  # the original key order


def _from_json(value: Any, where: str) -> Extracted | None:
    found = _find_array(value, MAX_DEPTH)
    if found is None:
        return None
    records = found.items if found.objects else list(map(_as_record, found.items))
    if not found.path:
        return Extracted(records, "json_records", where)
    nested = f"{where}:{'.'.join(found.path)}"
    return Extracted(records, "json_records", nested, _envelope(value, found.path, len(records)))


def _json_text(text: str) -> msgspec.Raw | None:
    """`text` as raw JSON when it looks like an array or object, without newlines (so that no
    record spans lines in the JSONL file): reformatted only when it has any."""
    text = text.strip()  # JSON may be surrounded by whitespace; the record split must not see it
    if text[:1] not in ("[", "{"):
        return None
    try:
        data = text.encode()
        if too_deep(data):
            return None
        if b"\n" in data or b"\r" in data:
            data = msgspec.json.format(data, indent=-1)
    except (msgspec.DecodeError, UnicodeEncodeError):  # not JSON after all, or lone surrogates
        return None
    return msgspec.Raw(data)


def _from_file_groups(value: Any) -> Extracted | None:
    """codepager's own compact search page (`results.files`: `{path: {line: entry}}`, see
    `server.records.group_by_file`) as its flat match records, the rows a dataset of them has
    wherever it was saved; None for anything else."""
    results = value.get("results") if type(value) is dict else None
    if type(results) is not dict:
        return None
    files = results.get("files")
    if type(files) is not dict or not files or not all(type(v) is dict for v in files.values()):
        return None
    try:
        records = records_of_groups(files)
    except (ValueError, TypeError, AttributeError):  # keys that are not line numbers: not such a page
        return None
    note = f"<{len(records)} records: saved in the dataset>"
    envelope = {**value, "results": {**results, "files": note}}
    return Extracted(records, "json_records", "structuredContent:results.files", envelope)


def _from_blocks(result: ToolResult) -> Extracted:
    """One record per content block, its structured content (if any) kept as the envelope."""
    records = [
        {"block": i, **block.model_dump(mode="json", by_alias=True, exclude_none=True)}
        for i, block in enumerate(result.content)
    ]
    structured = result.structured_content
    return Extracted(
        records, "json_records", "content", None if structured is None else {"structuredContent": structured}
    )


def extract_records(result: ToolResult, structured: bytes | None = None) -> Extracted:
    """The records to save for `result`. `structured` is its structured content's JSON when the
    caller already has it."""
    text = result_text(result)
    if text is None:
        return _from_blocks(result)
    if structured is None and result.structured_content is not None:
        structured = dumps_bytes(result.structured_content)
    if structured is not None and not too_deep(structured):
        found = _from_file_groups(result.structured_content) or _from_json(
            result.structured_content, "structuredContent"
        )
        if found is not None:
            return found
    raw = _json_text(text)
    try:
        found = _from_json(raw, "text") if raw is not None else None
    except msgspec.DecodeError:  # looked like JSON, is not
        found = None
    if found is not None:
        return found
    if not text and structured is not None:  # serialized once, above
        text = msgspec.json.format(structured, indent=1).decode()
    # Lines end at "\n" only, as for ripgrep: `splitlines` also broke them at form feeds,
    # U+2028 and five other characters that logs and sources hold inside a line.
    rows = text.split("\n")
    if rows[-1] == "":  # a final newline ends the last line; it does not start another
        rows.pop()
    lines = [{"line": i, "text": line.removesuffix("\r")} for i, line in enumerate(rows, 1)]
    return Extracted(lines, "text_lines", "text")
