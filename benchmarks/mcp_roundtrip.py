"""MCP round trip over stdio: what one page costs an agent end to end.

Starts `codepager serve` as a real stdio subprocess (as Claude Code would) over a generated tree
and measures, with a fastmcp Client:
- page 1 of a regex search (runs ripgrep, stores the session),
- a cached page (page >= 2, served from the session store),
- bytes per page on the wire (the text block).
Peer, side by side in the same run: a bare fastmcp stdio server whose one tool returns a
precomputed payload of the same size as our page — the floor that transport, JSON-RPC and the
client impose. The ratio cached-page / bare-echo is codepager's own per-page overhead.

Run: .venv/bin/python benchmarks/mcp_roundtrip.py [--files 200 --hits 50 --repeats 60]
Target (the paging design's): a cached page under 10 ms end to end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from fastmcp import Client
from fastmcp.client.transports import StdioTransport

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.report import Report, command, counts_parser, verdict
from harness.results import structured_of, text_of

ECHO_SERVER = textwrap.dedent(
    """
    import sys
    from fastmcp import FastMCP
    from fastmcp.tools.base import ToolResult
    from mcp_types import TextContent
    import json
    payload = open(sys.argv[1], encoding="utf-8").read()
    structured = json.loads(open(sys.argv[2], encoding="utf-8").read())
    app = FastMCP("echo")

    @app.tool
    def page() -> ToolResult:
        return ToolResult(content=[TextContent(type="text", text=payload)], structured_content=structured)

    app.run("stdio", show_banner=False)
    """
)


def make_tree(root: Path, files: int, hits: int) -> None:
    for i in range(files):
        path = root / f"pkg{i % 20}" / f"mod{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(f"def target_{i}_{j}(x):\n    return x * {j}" for j in range(hits)) + "\n")


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def measure(root: Path, work: Path, repeats: int) -> dict[str, float]:
    env = dict(os.environ)
    env.update(
        CODEPAGER_INDEX__CACHE_DIR=str(work / "cache"),
        CODEPAGER_INDEX__INDEX_ON_START="false",
        CODEPAGER_OFFLOAD__OUTPUT_DIR=str(work / "offload"),
    )
    codepager = str(Path(sys.executable).parent / "codepager")
    ours = Client(StdioTransport(codepager, ["serve", "--root", str(root)], env=env))
    first_times, cached_times, page_bytes = [], [], []
    async with ours:
        for i in range(repeats):
            pattern = rf"target_\d+_{i % 40}\b|def target"  # distinct searches: page 1 really searches
            t0 = time.perf_counter()
            r1 = await ours.call_tool("regex_search", {"pattern": pattern, "page_size": 50})
            first_times.append(time.perf_counter() - t0)
            cursor = structured_of(r1.structured_content)["pagination"]["next_cursor"]
            t0 = time.perf_counter()
            r2 = await ours.call_tool("regex_search", {"cursor": cursor})
            cached_times.append(time.perf_counter() - t0)
            assert structured_of(r2.structured_content)["metadata"]["cache"] == "hit"
            page_bytes.append(len(text_of(r2.content[0]).encode()))

        # The same answer as our cached page: its text block and its structuredContent.
        payload_file = work / "payload.txt"
        payload_file.write_text(text_of(r2.content[0]), encoding="utf-8")
        structured_file = work / "structured.json"
        structured_file.write_text(json.dumps(r2.structured_content), encoding="utf-8")
    script = work / "echo_server.py"
    script.write_text(ECHO_SERVER)
    bare = Client(StdioTransport(sys.executable, [str(script), str(payload_file), str(structured_file)], env=env))
    echo_times = []
    async with bare:
        for _ in range(repeats):
            t0 = time.perf_counter()
            r = await bare.call_tool("page", {})
            echo_times.append(time.perf_counter() - t0)
            assert len(text_of(r.content[0])) == len(payload_file.read_text(encoding="utf-8"))
    return {
        "first_ms": median_ms(first_times),
        "cached_ms": median_ms(cached_times),
        "echo_ms": median_ms(echo_times),
        "page_bytes": statistics.median(page_bytes),
        "total_matches": structured_of(r1.structured_content)["results"]["total_count"],
    }


def parser() -> argparse.ArgumentParser:
    return counts_parser(__doc__, files=200, hits=50, repeats=60)


def run(args: argparse.Namespace) -> Report:
    with tempfile.TemporaryDirectory(prefix="codepager-bench-") as tmp:
        work = Path(tmp)
        root = work / "tree"
        make_tree(root, args.files, args.hits)
        r = asyncio.run(measure(root, work, args.repeats))
    met = r["cached_ms"] < 10
    markdown = (
        f"| call | median |\n|---|---|\n"
        f"| page 1 (ripgrep over {args.files} files, {r['total_matches']:,} matches) | {r['first_ms']:.2f} ms |\n"
        f"| cached page (page 2, from the session store) | {r['cached_ms']:.2f} ms |\n"
        f"| peer: bare fastmcp tool returning the same {r['page_bytes'] / 1024:.1f} KB page | {r['echo_ms']:.2f} ms |\n"
        f"\ncached page / bare echo: {r['cached_ms'] / r['echo_ms']:.2f}x; page 1 / cached page: "
        f"{r['first_ms'] / r['cached_ms']:.1f}x; target cached page < 10 ms: {verdict(met)}"
    )
    headline = (
        f"a cached page costs {r['cached_ms']:.2f} ms end to end over stdio, "
        f"{r['cached_ms'] / r['echo_ms']:.2f}x a bare fastmcp tool returning the same page "
        f"(target < 10 ms: {verdict(met)})"
    )
    return Report(markdown=markdown, headline=headline, figures=r, target_met=met)


main = command(parser, run)


if __name__ == "__main__":
    sys.exit(main())
