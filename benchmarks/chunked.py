"""Chunked stdio benchmark: a ~5 MB tool result over chunked framing vs fastmcp's plain stdio.

Side by side on one machine, one server body (`harness/chunked_server.py`, tool `blob`
returning multi-byte text), each variant a real subprocess behind a real `fastmcp.Client`:

- plain:   fastmcp `StdioTransport`  <->  `FastMCP.run_stdio_async` (one ~10 MB JSON line)
- chunked: `ChunkedStdioTransport`   <->  `chunked_stdio_server` at the default 60 KiB limit
- chunked, unsplit: the chunked transports with a limit above the message, so it travels as one
  plain line: isolates the cost of framing from the rest of the two transports' plumbing.
- plain server, chunked client: fastmcp's plain server read by our client (the interop case):
  isolates the client's line reader, the main difference between the first two.

All clients connect first (process start-up is not measured); then each round times one call
per variant in turn, so machine noise hits every variant alike. Reports the median per
variant. The wire message is about twice the tool result: fastmcp sends the text both as a
content block and as structuredContent.

Run: .venv/bin/python benchmarks/chunked.py [--mb 5] [--runs 9]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
from fastmcp import Client
from fastmcp.client.transports import ClientTransport, StdioTransport

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.report import Report, add_report_argument, command
from harness.chunked_server import blob_text
from server.transports.chunked_client import ChunkedStdioTransport
from server.transports.framing import FramingOptions

FIXTURE = ["-m", "harness.chunked_server"]
UNSPLIT_LIMIT = 1 << 30


def variants() -> dict[str, Callable[[], ClientTransport]]:
    return {
        "plain stdio (fastmcp)": lambda: StdioTransport(sys.executable, [*FIXTURE, "plain"], cwd=str(ROOT)),
        "chunked stdio, 60 KiB frames": lambda: ChunkedStdioTransport(
            sys.executable, [*FIXTURE, "chunked"], cwd=str(ROOT)
        ),
        "chunked stdio, unsplit": lambda: ChunkedStdioTransport(
            sys.executable,
            [*FIXTURE, "chunked", str(UNSPLIT_LIMIT)],
            cwd=str(ROOT),
            framing=FramingOptions(chunk_limit=UNSPLIT_LIMIT),
        ),
        "plain server, chunked client": lambda: ChunkedStdioTransport(
            sys.executable, [*FIXTURE, "plain"], cwd=str(ROOT)
        ),
    }


def chars_for_bytes(target_bytes: int) -> int:
    """How many characters of the fixture's text make `target_bytes` of UTF-8."""
    sample = blob_text(10_000)
    return int(target_bytes * len(sample) / len(sample.encode()))


async def measure(size_chars: int, runs: int) -> dict[str, list[float]]:
    expected = blob_text(size_chars)
    timings: dict[str, list[float]] = {name: [] for name in variants()}
    async with AsyncExitStack() as stack:
        clients = {name: await stack.enter_async_context(Client(make())) for name, make in variants().items()}
        for client in clients.values():  # warm-up: first-call imports and caches
            await client.call_tool("blob", {"size": 1000})
        for _ in range(runs):
            for name, client in clients.items():
                start = time.perf_counter()
                result = await client.call_tool("blob", {"size": size_chars})
                timings[name].append(time.perf_counter() - start)
                if result.content[0].text != expected:
                    raise SystemExit(f"{name}: the tool result came back altered")
    return timings


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=float, default=5.0, help="tool result size in MB of UTF-8 (default 5)")
    p.add_argument("--runs", type=int, default=9, help="timed calls per variant (default 9)")
    add_report_argument(p)
    return p


def run(args: argparse.Namespace) -> Report:
    size_chars = chars_for_bytes(int(args.mb * 1_000_000))
    result_bytes = len(blob_text(size_chars).encode())
    timings = anyio.run(measure, size_chars, args.runs)

    medians = {name: statistics.median(samples) for name, samples in timings.items()}
    baseline = medians["plain stdio (fastmcp)"]
    lines = [
        f"tool result: {result_bytes / 1e6:.2f} MB of UTF-8 ({size_chars} chars), {args.runs} runs per variant\n",
        "| transport | median | throughput (tool result) | vs plain |",
        "|---|---|---|---|",
        *(
            f"| {name} | {median * 1000:.0f} ms | {result_bytes / median / 1e6:.1f} MB/s | {baseline / median:.2f}x |"
            for name, median in medians.items()
        ),
        f"\nmachine: {platform.system()} {platform.machine()}, Python {platform.python_version()}",
    ]
    speedup = baseline / medians["chunked stdio, 60 KiB frames"]
    return Report(
        markdown="\n".join(lines),
        headline=(
            f"a {result_bytes / 1e6:.0f} MB tool result over chunked stdio (60 KiB frames) is {speedup:.2f}x "
            "as fast as fastmcp's plain stdio"
        ),
        figures={"result_bytes": result_bytes, "median_s": medians, "chunked_vs_plain": speedup},
    )


main = command(parser, run)


if __name__ == "__main__":
    sys.exit(main())
