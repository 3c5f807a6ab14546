"""Proxy benchmark: what `codepager proxy` costs on the way through, and when it intercepts.

1. Pass-through latency, side by side on one small call (`small` of harness/proxy_backend.py,
   a few hundred bytes with structured content and _meta), each path a real stdio process
   driven by a fastmcp client, calls interleaved so load hits all paths alike:
   - direct: the backend itself;
   - fastmcp proxy: a bare fastmcp ProxyProvider in front of it (the floor of any proxy);
   - codepager proxy: `codepager proxy -- python harness/proxy_backend.py`.
   Reported: median and p90 per call, and the median added over direct.
2. Interception of a 50,000-record result (budget: 50-100 ms, the reference proxy's cost): the
   interceptor's whole path in process (wire size, records out of the JSON text, profile,
   JSONL + metadata written atomically, compact answer), and its parts. Also 50,000 lines
   of plain text.

Run: .venv/bin/python benchmarks/proxy.py [--calls 300] [--repeats 15]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from fastmcp.tools.base import ToolResult
from mcp_types import TextContent

from benchmarks.report import Report, command, counts_parser
from harness.proxy_backend import BACKEND_SCRIPT
from server.proxy.dataset_store import DatasetStore
from server.proxy.extraction import extract_records
from server.proxy.profile import profile_records
from server.proxy.saver import ProxiedCall, ResultSaver
from server.proxy.size import wire_size

BACKEND = [sys.executable, BACKEND_SCRIPT]
BARE_PROXY = f"""
import sys
from fastmcp import FastMCP
from fastmcp.client.transports import StdioTransport
from fastmcp.server.providers.proxy import ProxyClient, ProxyProvider
app = FastMCP("bare-proxy")
app.add_provider(ProxyProvider(ProxyClient(StdioTransport({BACKEND[0]!r}, [{BACKEND[1]!r}]), mode="auto").new))
app.run("stdio", show_banner=False)
"""


def codepager() -> str:
    return str(Path(sys.executable).parent / "codepager")


async def pass_through(calls: int, data_dir: Path) -> dict[str, list[float]]:
    paths = {
        "direct": StdioTransport(BACKEND[0], BACKEND[1:]),
        "fastmcp proxy": StdioTransport(sys.executable, ["-c", BARE_PROXY]),
        "codepager proxy": StdioTransport(codepager(), ["proxy", "--data-dir", str(data_dir), "--", *BACKEND]),
    }
    clients = {name: Client(t, timeout=60, init_timeout=120) for name, t in paths.items()}
    times: dict[str, list[float]] = {name: [] for name in paths}
    async with AsyncExitStack() as connected:
        for c in clients.values():
            await connected.enter_async_context(c)
        for c in clients.values():  # warm up: tool lists cached, subprocesses started
            for _ in range(5):
                await c.call_tool_mcp("small", {"name": "bench"})
        for _ in range(calls):
            for name, c in clients.items():
                t0 = time.perf_counter_ns()
                result = await c.call_tool_mcp("small", {"name": "bench"})
                times[name].append((time.perf_counter_ns() - t0) / 1e6)
                assert result.structured_content == {"greeting": "hello bench", "unicode": "héllo ✓"}
    return times


def rows(n: int) -> list[dict[str, Any]]:
    """Records like a database tool returns: an id, categories, numbers, a timestamp, free text."""
    statuses, regions = ("active", "suspended", "closed"), ("eu-west", "us-east", "ap-south", "sa-east")
    return [
        {
            "id": i,
            "customer": f"customer-{i % 9973}",
            "status": statuses[i % 3],
            "region": regions[i % 4],
            "amount": round(i * 1.37 % 1000, 2),
            "created_at": f"2025-{i % 12 + 1:02d}-{i % 28 + 1:02d}T10:{i % 60:02d}:00Z",
            "note": f"order {i} shipped via carrier {i % 17}",
        }
        for i in range(n)
    ]


def median_ms(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median (wall, CPU of this thread) in ms; CPU because the cores are shared with others."""
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        fn()
        cpu.append(time.thread_time_ns() - c0)
        wall.append(time.perf_counter_ns() - t0)
    return statistics.median(wall) / 1e6, statistics.median(cpu) / 1e6


def interception(repeats: int, data_dir: Path) -> list[tuple[str, float, float, int]]:
    records = rows(50_000)
    json_result = ToolResult(content=[TextContent(type="text", text=json.dumps(records))])
    text = "\n".join(
        f"2025-06-01T10:00:{i % 60:02d}Z INFO worker-{i % 8} handled request {i} in {i % 250} ms" for i in range(50_000)
    )
    text_result = ToolResult(content=[TextContent(type="text", text=text)])
    store = DatasetStore(data_dir)
    saver = ResultSaver(store, threshold_tokens=8192, schema_sample_size=100)

    def intercept(result: ToolResult) -> Callable[[], object]:
        def run() -> object:
            extracted = extract_records(result)
            assert extracted is not None
            answer = saver.save(result, extracted, ProxiedCall("query", "db", {"sql": "SELECT *"}, wire_size(result)))
            assert (
                answer.structured_content is not None and answer.structured_content["intercepted"] == "saved_as_dataset"
            )
            return answer

        return run

    extracted = extract_records(json_result)
    assert extracted is not None
    size = wire_size(json_result)
    out = []
    for label, fn in (
        ("50,000 JSON records: whole interception", intercept(json_result)),
        ("  wire size", lambda: wire_size(json_result)),
        ("  records out of the JSON text", lambda: extract_records(json_result)),
        ("  profile (schema sample + distinct values)", lambda: profile_records(extracted.records, sample_size=100)),
        ("  JSONL + metadata written atomically", lambda: store.save(store.new_id(), extracted.records, {"tool": "q"})),
        ("50,000 text lines: whole interception", intercept(text_result)),
    ):
        wall, cpu = median_ms(fn, repeats)
        out.append((label, wall, cpu, size.bytes if label.startswith("50,000 JSON") else 0))
    return out


def parser() -> argparse.ArgumentParser:
    return counts_parser(__doc__, calls=300, repeats=15)


def run(args: argparse.Namespace) -> Report:
    with tempfile.TemporaryDirectory() as tmp:
        times = asyncio.run(pass_through(args.calls, Path(tmp) / "pass"))
        steps = interception(args.repeats, Path(tmp) / "data")
    medians = {name: statistics.median(samples) for name, samples in times.items()}
    direct = medians["direct"]
    lines = [
        f"pass-through, small call, {args.calls} interleaved calls per path (ms):",
        "| path | median | p90 | added (median) |\n|---|---|---|---|",
    ]
    for name, samples in times.items():
        p90 = statistics.quantiles(samples, n=10)[-1]
        lines.append(f"| {name} | {medians[name]:.2f} | {p90:.2f} | {medians[name] - direct:+.2f} |")
    lines += ["\ninterception (median wall / CPU ms):", "| step | wall | CPU |\n|---|---|---|"]
    for label, wall, cpu, size in steps:
        suffix = f" ({size / 1e6:.1f} MB on the wire)" if size else ""
        lines.append(f"| {label}{suffix} | {wall:.1f} | {cpu:.1f} |")
    ours, bare = medians["codepager proxy"], medians["fastmcp proxy"]
    whole = next(cpu for label, _, cpu, _ in steps if label.startswith("50,000 JSON"))
    headline = (
        f"pass-through adds {ours - direct:+.1f} ms per call over calling the server directly, "
        f"{ours / bare:.2f}x a bare fastmcp proxy; saving a 50,000-record result takes {whole:.0f} ms of CPU"
    )
    figures = {"median_ms": medians, "interception_cpu_ms": {label.strip(): cpu for label, _, cpu, _ in steps}}
    return Report(markdown="\n".join(lines), headline=headline, figures=figures)


main = command(parser, run)


if __name__ == "__main__":
    sys.exit(main())
