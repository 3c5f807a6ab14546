"""A tiny real MCP server for the proxy tests, run as a stdio subprocess behind `codepager proxy`.

Each tool produces one shape of result a proxied server can return: JSON records (bare, nested
under a key, or as structured content), plain text, an error, a slow answer, structured
content with a declared output schema (also as one of an exact size), a crash of the whole process,
JSON nested thousands of levels deep, one very long text line, and an error, an image and a
`_meta` of any size.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from pathlib import Path
from typing import Any

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.tools.base import ToolResult
from mcp_types import ImageContent, TextContent

#: This file, which a test or benchmark runs as the stdio command behind the proxy.
BACKEND_SCRIPT = str(Path(__file__).resolve())

app = FastMCP("proxy-test-backend")

KINDS = ("alpha", "beta", "gamma")


def make_rows(n: int, *, mixed: bool = False) -> list[dict[str, Any]]:
    """`n` rows with a low-cardinality `kind`, a unique `id` and, with `mixed`, a `value` that is
    sometimes a number and sometimes a string."""
    rows = []
    for i in range(n):
        value: int | str = i * 10
        if mixed and i % 3 == 0:
            value = f"v{i}"
        rows.append({"id": i, "kind": KINDS[i % len(KINDS)], "value": value, "note": f"row {i} " + "x" * 40})
    return rows


@app.tool
def records(n: int = 10, mixed: bool = False) -> ToolResult:
    """A bare JSON array of `n` records as the only text block (no structured content)."""
    return ToolResult(content=[TextContent(type="text", text=json.dumps(make_rows(n, mixed=mixed)))])


@app.tool
def nested_records(n: int = 10) -> ToolResult:
    """Records nested one level down, next to other keys: {"total": n, "rows": [...]}."""
    payload = {"total": n, "rows": make_rows(n)}
    return ToolResult(content=[TextContent(type="text", text=json.dumps(payload, indent=2))])


@app.tool
def structured_records(n: int = 10) -> dict[str, Any]:
    """Records in structuredContent (fastmcp declares an output schema for this tool)."""
    return {"count": n, "items": make_rows(n)}


@app.tool
def text(lines: int = 10) -> str:
    """Plain text log lines; every 7th line is an ERROR."""
    return "\n".join(f"{'ERROR' if i % 7 == 0 else 'INFO'} line {i} " + "y" * 30 for i in range(1, lines + 1))


@app.tool
def small(name: str = "world") -> ToolResult:
    """A small result with structured content and _meta, to check pass-through is exact."""
    return ToolResult(
        content=[TextContent(type="text", text=f"hello {name}")],
        structured_content={"greeting": f"hello {name}", "unicode": "héllo ✓"},
        meta={"backend": "proxy-test-backend", "n": 1},
    )


@app.tool
def fail(message: str = "backend refused") -> str:
    """Always fails with a tool error."""
    raise ToolError(message)


@app.tool
async def slow(seconds: float = 5.0) -> str:
    """Sleeps, to exercise the proxy's call timeout."""
    await asyncio.sleep(seconds)
    return "done"


@app.tool
def crash() -> str:
    """Kills this server process mid-call, like a backend that segfaults."""
    os._exit(3)


@app.tool
def padded(pad: int = 10) -> dict[str, str]:
    """Structured content `{"data": "xx…"}` of `pad` x's, which fastmcp also sends as the same
    JSON in a text block: a result of an exact size, counted once or twice."""
    return {"data": "x" * pad}


@app.tool
def deep(depth: int = 5000) -> ToolResult:
    """A JSON array of two records whose first holds `depth` nested arrays, as text: deeper than
    any recursive JSON walk can follow."""
    nested = "[" * depth + '"bottom"' + "]" * depth
    return ToolResult(content=[TextContent(type="text", text=f'[{{"nested":{nested}}},{{"id":2}}]')])


@app.tool
def long_text(mb: int = 30) -> ToolResult:
    """`mb` megabytes of text on one line (one JSON-RPC line of that size on the wire), ending
    in a marker so that losing its tail shows."""
    return ToolResult(content=[TextContent(type="text", text="z" * (mb * 1024 * 1024) + " END")])


@app.tool
def huge_error(mb: int = 20) -> str:
    """Fails with an error of `mb` megabytes of text, ending in a marker."""
    raise ToolError("e" * (mb * 1024 * 1024) + " END")


def image_bytes(mb: int) -> bytes:
    """What the `image` tool sends: `mb` megabytes of every byte value in turn."""
    return bytes(range(256)) * (mb * 4096)


@app.tool
def image(mb: int = 20) -> ToolResult:
    """An image of `mb` megabytes (`image_bytes`, base64 on the wire) after a line of text."""
    data = base64.b64encode(image_bytes(mb)).decode()
    picture = ImageContent(type="image", data=data, mime_type="image/png")
    return ToolResult(content=[TextContent(type="text", text="a picture"), picture])


@app.tool
def big_meta(mb: int = 20) -> ToolResult:
    """A small result whose _meta (and its text block's) holds `mb` megabytes."""
    blob = "m" * (mb * 1024 * 1024)
    return ToolResult(
        content=[TextContent(type="text", text="small", meta={"blob": blob})],
        meta={"backend": "proxy-test-backend", "blob": blob},
    )


@app.tool
def pid() -> int:
    """This process's id, to tell a restarted backend from the first one."""
    return os.getpid()


if __name__ == "__main__":
    app.run("stdio", show_banner=False)
