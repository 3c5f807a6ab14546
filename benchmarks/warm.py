"""Warm hybrid queries with change detection live, side by side with semble (issue 38, item 6).

Trees:

- `sympy-1x`: the scale benchmark's 1x tree (one copy of sympy 1.14), its 8 queries;
- `multilang`: the multi-language set's 8 repositories (Rust, TypeScript, Java, C++, C, Ruby,
  Elixir), its 150 labelled queries, each in its own repository;
- `stdlib-8x`: the interpreter's standard library without site-packages (`top_k.copy_stdlib`)
  copied 8 times, ~675k chunks, 10 queries (semble only when `--semble-trees` names it: its
  index of that tree takes several GB). The issue measured this tree over MCP, so it is also
  timed that way (`over_mcp`): a `codepager serve` over stdio on the same index, each call a
  real search (a different, negligible `threshold` per timed run: the session cache answers a
  repeated call), timed from the client. Timing starts once the server's start-up check of the
  index against the tree is over (`index_status` stops saying `building`), as the engine's
  runs start once its first check is (`wait_idle`): a search meanwhile shares the cores with a
  walk of the whole tree, which is start-up, not a warm search.

codepager answers through `SearchEngine`, the engine a server uses, with file events live (every
search first makes sure every change made before it is recorded). semble 0.7.0 runs in its own
virtualenv as a long-lived subprocess (`benchmarks/semble_timer.py`) with the same static
model. Per query, each system runs it once untimed, then `--repeats` times timed (as the scale
and retrieval benchmarks do); which system goes first alternates from query to query, so the
machine's load weighs on both alike. The p50 is over every timed run of the tree, in wall time
(the targets') and in CPU time, which the load sways less: codepager's searching thread's (its
numpy products are held to one thread, and its background threads are idle), semble's whole
process's (its numpy may use several threads).

`--dump FILE` writes each query's top 10 (path, lines, score) as JSON: a change meant only to
make searches faster must leave it identical (compare a dump of the code before and after).

Indexes are built once into `--work` (untimed) and reused.

usage: python benchmarks/warm.py [--trees sympy-1x,multilang,stdlib-8x]
       [--semble-trees sympy-1x,multilang] [--repeats 7] [--work DIR] [--dump FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fastmcp import Client
from fastmcp.client.transports import StdioTransport

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # as a script, benchmarks/regex.py would shadow the `regex` package

from benchmarks.report import Report, add_report_argument, emit, verdict
from benchmarks.retrieval import BENCH, DEFAULT_MULTILANG
from benchmarks.scale import DEFAULT_SOURCE, DEFAULT_WORK, QUERIES, monorepo
from benchmarks.top_k import copy_stdlib
from harness.results import structured_of
from search_engine.config import EngineConfig
from search_engine.embedding.embedder import resolve_model
from search_engine.engine import SearchEngine
from search_engine.models import SearchMode, SearchRequest

TOP_K = 10
#: The issue's bound for the ~675k-chunk tree; on the others the bound is semble's p50.
STDLIB_P50_MS = 20.0
STDLIB_COPIES = 8
STDLIB_QUERIES = (
    "parse a configuration file",
    "open a network connection with a timeout",
    "compress data with gzip",
    "send an email over SMTP",
    "parse command line arguments",
    "format a date as a string",
    "read rows from a CSV file",
    "spawn a subprocess and capture its output",
    "JSON encoder for custom objects",
    "thread pool executor",
)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trees", default="sympy-1x,multilang,stdlib-8x")
    p.add_argument("--semble-trees", default="sympy-1x,multilang", help="trees semble also runs ('' for none)")
    p.add_argument("--repeats", type=int, default=7, help="timed runs of each query")
    p.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="the sympy tree the scale benchmark copies")
    p.add_argument("--multilang", type=Path, default=DEFAULT_MULTILANG, help="the multi-language set's corpora")
    p.add_argument("--work", type=Path, default=DEFAULT_WORK, help="where trees and indexes are kept")
    p.add_argument("--semble-python", type=Path, default=Path("/work/semble-venv/bin/python"))
    p.add_argument("--dump", type=Path, help="write each query's top 10 here (JSON)")
    add_report_argument(p)
    return p


def tree(name: str, args: argparse.Namespace) -> list[tuple[Path, str]]:
    """(root, query) pairs of a tree, in the order they run."""
    if name == "sympy-1x":
        root = monorepo(args.source, args.work, 1).resolve()
        return [(root, q) for q in QUERIES]
    if name == "multilang":
        annotations = BENCH / "multilang" / "annotations"
        return [
            ((args.multilang / ann.stem).resolve(), item["query"])
            for ann in sorted(annotations.glob("*.json"))
            for item in json.loads(ann.read_text())
        ]
    if name == "stdlib-8x":
        root = (args.work / "stdlib-8x").resolve()
        if not (args.work / ".stdlib-8x.done").exists():
            for i in range(STDLIB_COPIES):
                copy_stdlib(root / f"copy-{i:02d}")
            (args.work / ".stdlib-8x.done").write_text("ok\n")
        return [(root, q) for q in STDLIB_QUERIES]
    raise SystemExit(f"unknown tree {name!r}: sympy-1x, multilang or stdlib-8x")


class Semble:
    """semble's long-lived timing process (`semble_timer.py`)."""

    def __init__(self, python: Path) -> None:
        model = Path(resolve_model(EngineConfig(embedding_profile="static")).source)
        env = {**os.environ, "SEMBLE_MODEL_NAME": str(model), "HF_HUB_OFFLINE": "1"}
        self.proc = subprocess.Popen(
            [str(python), str(ROOT / "benchmarks" / "semble_timer.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tempfile.gettempdir(),
        )

    def ask(self, **request: Any) -> dict[str, Any]:
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None and stdout is not None
        stdin.write(json.dumps(request) + "\n")
        stdin.flush()
        answer: dict[str, Any] = json.loads(stdout.readline())
        return answer

    def close(self) -> None:
        stdin = self.proc.stdin
        if stdin is not None:
            stdin.close()
        self.proc.wait(timeout=60)


Timed = tuple[list[float], list[float], list[Any]]


def timed_ours(engine: SearchEngine, request: SearchRequest, repeats: int) -> Timed:
    """`repeats` timed runs after an untimed one (wall and thread CPU times), and that run's
    top 10 (for `--dump`)."""
    result = engine.search(request)
    times, cpu = [], []
    for _ in range(repeats):
        started, cpu_started = time.perf_counter(), time.thread_time()
        engine.search(request)
        times.append((time.perf_counter() - started) * 1000)
        cpu.append((time.thread_time() - cpu_started) * 1000)
    top = [[m.path, m.line_start, m.line_end, m.score] for m in result.matches]
    return times, cpu, top


def measure(name: str, args: argparse.Namespace, semble: Semble | None) -> dict[str, Any]:
    pairs = tree(name, args)
    engine = SearchEngine(EngineConfig(cache_dir=args.work / "warm-cache"))
    engine.indexes.embedder.embed(["warm up"])
    roots = sorted({root for root, _ in pairs})
    chunks = 0
    for root in roots:  # built (untimed) on the first run, then opened
        engine.search(SearchRequest(mode=SearchMode.HYBRID, query="warm up", root=str(root), top_k=TOP_K))
        engine.indexes.wait_idle(root, 600)
        chunks += len(engine.indexes.get(root).chunks)
        if semble is not None:
            semble.ask(op="index", root=str(root))
    ours: list[float] = []
    ours_cpu: list[float] = []
    theirs: list[float] = []
    theirs_cpu: list[float] = []
    tops = []

    def peer(root: Path, query: str) -> None:
        if semble is not None:
            answer = semble.ask(op="search", root=str(root), query=query, repeats=args.repeats, top_k=TOP_K)
            theirs.extend(answer["ms"])
            theirs_cpu.extend(answer["cpu_ms"])

    try:
        for n, (root, query) in enumerate(pairs):
            request = SearchRequest(mode=SearchMode.HYBRID, query=query, root=str(root), top_k=TOP_K)
            if n % 2:
                peer(root, query)
            times, cpu, top = timed_ours(engine, request, args.repeats)
            ours += times
            ours_cpu += cpu
            tops.append({"root": root.name, "query": query, "top": top})
            if not n % 2:
                peer(root, query)
        states = {engine.indexes.current(root)[1].state for root in roots}
    finally:
        engine.close()
    row: dict[str, Any] = {
        "tree": name,
        "roots": len(roots),
        "chunks": chunks,
        "queries": len(pairs),
        "ours_p50_ms": statistics.median(ours),
        "ours_cpu_p50_ms": statistics.median(ours_cpu),
        "states": sorted(states),
        "tops": tops,
    }
    if theirs:
        row["semble_p50_ms"] = statistics.median(theirs)
        row["semble_cpu_p50_ms"] = statistics.median(theirs_cpu)
    if name == "stdlib-8x":
        row["mcp_p50_ms"] = statistics.median(asyncio.run(over_mcp(roots[0], STDLIB_QUERIES, args.work, args.repeats)))
    print(f"{name}: { ({k: v for k, v in row.items() if k != 'tops'}) }", file=sys.stderr)
    return row


async def over_mcp(root: Path, queries: Sequence[str], work: Path, repeats: int) -> list[float]:
    """Each query's `repeats` timed `hybrid_search` calls to a `codepager serve` over stdio on
    the index `measure` built (after one untimed call), in ms from the client: what an agent
    waits. Every timed call asks another `threshold` (a few millionths of the best score,
    which leaves the ten results as they are), so each is a search, not a cached page, of the
    same work as the first."""
    env = {
        **os.environ,
        "CODEPAGER_INDEX__CACHE_DIR": str(work / "warm-cache"),
        "CODEPAGER_OFFLOAD__OUTPUT_DIR": str(work / "mcp-offload"),
    }
    codepager = str(Path(sys.executable).parent / "codepager")
    times = []
    async with Client(StdioTransport(codepager, ["serve", "--root", str(root)], env=env), timeout=600) as client:
        await start_up_checked(client)
        for query in queries:
            await client.call_tool("hybrid_search", {"query": query, "top_k": TOP_K})
            for n in range(repeats):
                started = time.perf_counter()
                arguments = {"query": query, "top_k": TOP_K, "threshold": (n + 1) * 1e-6}
                result = await client.call_tool("hybrid_search", arguments)
                times.append((time.perf_counter() - started) * 1000)
                if structured_of(result.structured_content)["metadata"]["cache"] != "miss":
                    raise SystemExit(f"a timed call over MCP was answered from the session cache: {query!r}")
    return times


async def start_up_checked(client: Client[Any], timeout_s: float = 600) -> None:
    """Return once the server has checked its index against the tree (its start-up build or
    update, on the background indexer's thread)."""
    deadline = time.monotonic() + timeout_s
    while (status := structured_of((await client.call_tool("index_status", {})).structured_content))["building"]:
        if time.monotonic() > deadline:
            raise SystemExit(f"the server's index was still being checked after {timeout_s:.0f} s: {status}")
        await asyncio.sleep(0.1)
    if status["error"]:
        raise SystemExit(f"the server's index check failed: {status['error']}")


def report(rows: list[dict[str, Any]], load: tuple[float, ...], after: tuple[float, ...], repeats: int) -> Report:
    out = [
        f"Load average: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min, 2 cores) when it started, "
        f"{after[0]:.1f} / {after[1]:.1f} / {after[2]:.1f} when it ended.",
        "",
        "| tree | roots | chunks | queries x timed runs | codepager hybrid p50 (events live) | semble 0.7.0 | ratio "
        "| CPU p50: codepager / semble |",
        "|---|---|---|---|---|---|---|---|",
    ]
    targets = []
    for r in rows:
        theirs = r.get("semble_p50_ms")
        ratio = f"**{r['ours_p50_ms'] / theirs:.2f}x**" if theirs else "-"
        cpu = f"{r['ours_cpu_p50_ms']:.2f} ms"
        if theirs:
            cpu += f" / {r['semble_cpu_p50_ms']:.2f} ms ({r['ours_cpu_p50_ms'] / r['semble_cpu_p50_ms']:.2f}x)"
        out.append(
            f"| {r['tree']} | {r['roots']} | {r['chunks']:,} | {r['queries']} x {repeats} | {r['ours_p50_ms']:.2f} ms "
            f"| {f'{theirs:.2f} ms' if theirs else 'not run'} | {ratio} | {cpu} |"
        )
        if theirs:
            targets.append((f"{r['tree']}: p50 <= semble's", f"{r['ours_p50_ms']:.2f} vs {theirs:.2f} ms",
                            r["ours_p50_ms"] <= theirs))  # fmt: skip
        if r["tree"] == "stdlib-8x":
            targets.append((f"stdlib-8x ({r['chunks']:,} chunks): p50 <= {STDLIB_P50_MS:.0f} ms",
                            f"{r['ours_p50_ms']:.2f} ms", r["ours_p50_ms"] <= STDLIB_P50_MS))  # fmt: skip
            if "mcp_p50_ms" in r:
                targets.append((f"stdlib-8x over MCP (stdio, from the client): p50 <= {STDLIB_P50_MS:.0f} ms",
                                f"{r['mcp_p50_ms']:.2f} ms", r["mcp_p50_ms"] <= STDLIB_P50_MS))  # fmt: skip
    out += ["", "| target | measured | verdict |", "|---|---|---|"]
    out += [f"| {t} | {m} | {verdict(ok)} |" for t, m, ok in targets]
    headline = "; ".join(
        f"{r['tree']} {r['ours_p50_ms']:.1f} ms"
        + (f" vs semble {r['semble_p50_ms']:.1f} ms" if "semble_p50_ms" in r else "")
        + (f" ({r['mcp_p50_ms']:.1f} ms over MCP)" if "mcp_p50_ms" in r else "")
        for r in rows
    )
    figures = {"rows": [{k: v for k, v in r.items() if k != "tops"} for r in rows]}
    return Report("\n".join(out), "warm hybrid p50 with change detection live: " + headline, figures,
                  target_met=all(ok for _, _, ok in targets))  # fmt: skip


def main() -> int:
    args = parser().parse_args()
    names = [n for n in args.trees.split(",") if n]
    with_semble = {n for n in args.semble_trees.split(",") if n}
    load = os.getloadavg()
    rows = []
    for name in names:
        semble = Semble(args.semble_python) if name in with_semble else None
        try:
            rows.append(measure(name, args, semble))
        finally:
            if semble is not None:
                semble.close()
    if args.dump:
        args.dump.write_text(json.dumps({r["tree"]: r["tops"] for r in rows}, indent=1))
    return emit(report(rows, load, os.getloadavg(), args.repeats), args)


if __name__ == "__main__":
    sys.exit(main())
