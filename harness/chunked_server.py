"""A tiny FastMCP server for the chunked stdio tests and benchmark, run as a real subprocess.

    python -m harness.chunked_server chunked [CHUNK_LIMIT]   # chunked framing
    python -m harness.chunked_server plain                   # fastmcp's own stdio

One server body for both transports, so the tests and benchmarks compare transports only.
"""

from __future__ import annotations

import sys

import anyio
from fastmcp import FastMCP

from server.transports.chunked_stdio import chunked_stdio_server
from server.transports.framing import FramingOptions
from server.transports.run import run_stdio

# Multi-byte on purpose (2-, 3- and 4-byte UTF-8), so frame cuts land inside characters.
_PATTERN = "codepager é ü 中文字 🚀🧪 "

app = FastMCP("chunked-fixture")


def blob_text(size: int) -> str:
    """Deterministic text of exactly `size` characters, for callers to compare against."""
    repeats = size // len(_PATTERN) + 1
    return (_PATTERN * repeats)[:size]


@app.tool
def blob(size: int) -> str:
    """Return `size` characters of multi-byte text."""
    return blob_text(size)


@app.tool
def echo(text: str) -> str:
    """Return `text` unchanged (the request carries the payload)."""
    return text


@app.tool
def noisy() -> str:
    """Print to stdout, which must land on stderr rather than corrupt the wire."""
    print("stray output from a tool", flush=True)
    return "still framed"


if __name__ == "__main__":
    transport = sys.argv[1]
    if transport == "chunked":
        framing = FramingOptions(chunk_limit=int(sys.argv[2])) if len(sys.argv) > 2 else FramingOptions()
        anyio.run(run_stdio, app, chunked_stdio_server(framing))
    elif transport == "plain":
        anyio.run(lambda: app.run_stdio_async(show_banner=False))
    else:
        sys.exit(f"usage: {sys.argv[0]} chunked [CHUNK_LIMIT] | plain")
