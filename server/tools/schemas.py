"""What `tools/list` says about our tools: compact input schemas and declared output schemas.

`tools/list` is paid for in every conversation (each tool's name, description and input schema
are in the model's context from the first turn), so the input schemas say each thing once and
nothing a model could not use: pydantic's spelling of an optional parameter
(`{"anyOf": [{"type": "string"}, {"type": "null"}], "default": null}`) is declared as the plain
type (an omitted argument is the same as null; the tools still accept an explicit null); null,
false and zero defaults are left out (a flag is off, a count zero, unless sent), and so are floors
of 0 and 1 (no count or size is negative; a call under one is refused naming it) and
`additionalProperties: false` (the server refuses an unknown argument, and for a search tool says
what it calls a sibling tool's argument, which a client refusing the call first could not).

Every tool declares an `outputSchema` (MCP 2025-06-18), so a client can validate
structuredContent and knows its shape without a call. The schemas name what an agent relies
on and stay open (`additionalProperties` allowed) so that a new field never breaks a client;
tests validate real answers of every tool and mode against them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from fastmcp.server.transforms import Transform
from fastmcp.tools.base import Tool


def _shape(required: list[str]) -> dict[str, Any]:
    return {"type": "object", "required": required}


#: A search tool's answer (`server.response`, `server.output.layer`), at either detail level:
#: compact pages carry `results.files` ({path: {line: entry}}), full and legacy ones
#: `results.matches`, offloaded ones `results.file_ref`; every `results` says its `mode` and
#: `count`. Only the top level is declared: each nested requirement costs every conversation
#: its characters in tools/list, and `results` is documented in docs/tools.md.
SEARCH_OUTPUT = _shape(["search", "results", "pagination", "metadata"])

#: A page of rows (analyze-with-duckdb, the proxy's read-dataset-page).
ROWS_OUTPUT = _shape(["results", "pagination"])
#: One root's index status (`root`, `building`, ...), or several roots' under `roots`.
INDEX_OUTPUT = _shape(["building"])
DATASETS_OUTPUT = _shape(["datasets", "count"])


#: Bounds against hostile calls (`server.tools.bounds`), far above any honest one: a call over
#: one is refused naming it, and listing them would cost every conversation ~300 characters.
_UNLISTED_BOUNDS = frozenset({"maxLength", "maxItems"})


#: Keywords left out at these values: they tell a model nothing it would not assume.
_UNINFORMATIVE = {"minimum": (0, 1), "additionalProperties": (False,)}


def compact_schema(schema: Any) -> Any:
    """`schema` with optional types declared plainly, null/false defaults, floors of 0 and 1,
    `additionalProperties: false` and the bounds against hostile calls left out."""
    if isinstance(schema, list):
        return [compact_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: compact_schema(v) for k, v in schema.items() if k not in _UNLISTED_BOUNDS and not _uninformative(k, v)}
    variants = out.get("anyOf")
    if isinstance(variants, list) and len(variants) == 2 and {"type": "null"} in variants:
        (plain,) = [v for v in variants if v != {"type": "null"}]
        out = {**{k: v for k, v in out.items() if k != "anyOf"}, **plain}
    if "default" in out and out["default"] in (None, False, 0, ""):
        del out["default"]
    return out


def _uninformative(keyword: str, value: Any) -> bool:
    """`keyword: value` is one `_UNINFORMATIVE` leaves out (`False == 0`, so types are compared too)."""
    return any(type(value) is type(v) and value == v for v in _UNINFORMATIVE.get(keyword, ()))


class CompactSchemas(Transform):
    """Lists the named tools with `compact_schema` input schemas. Calls are unaffected: the
    tools validate their arguments from their signatures. Other tools (a proxied server's) are
    listed exactly as their server declares them."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = frozenset(names)

    def _listed(self, tool: Tool) -> Tool:
        listed = tool.model_copy(update={"parameters": compact_schema(tool.parameters)})
        # fastmcp adds `_meta.fastmcp: {"tags": []}` to every listed tool; ours have no tags or
        # versions, so the copy (used only for the listing) leaves the empty entry out.
        meta = {k: v for k, v in tool.get_meta().items() if k != "fastmcp" or v != {"tags": []}} or None
        object.__setattr__(listed, "get_meta", lambda: meta)
        return listed

    async def list_tools(self, tools: Sequence[Tool]) -> Sequence[Tool]:
        return [self._listed(t) if t.name in self.names else t for t in tools]
