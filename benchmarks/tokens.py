"""What an answer costs an agent: characters per match against `rg -n` and `rg --json`, the
wire ratio (text block + structuredContent over structuredContent) per client, and the size of
`tools/list`.

Measured with the real server in process (fastmcp Client, the real ripgrep) on three real
corpora of the retrieval kit (`/work/shared/bench/fetch-corpora`: fastapi, pydantic, aiohttp,
each the package's own folder, paths like `fastapi/routing.py`) and three patterns. For each,
page 1 of `regex_search pattern=P page_size=50` is compared with what ripgrep prints for the
same 50 matches (`rg -n --sort path`: the first 50 lines, checked to be the same locations;
`rg --json --sort path`: every line up to the 50th match event). "chars per match" is the
length of the compact JSON of structuredContent (what Claude Code and Codex show the model)
divided by 50; the envelope (search, counts, pagination with its cursor, metadata) is included.

With `--recall`, ranked answers that fit a budget: over the Python set (81 queries, 4 repos)
and the multi-language set (150 queries, 8 repos) of the kit, the share of queries whose
relevant file appears within the first 1k, 2k and 4k tokens (characters / 4) of the answer,
for codepager's `hybrid_search` (its real compact page, snippets at the default 500
characters) and semble's MCP `search` (its real JSON answer, 10-line snippets, run in its own
virtualenv by `semble_answers_worker.py`), both with the same static model and TOP_K results.
A file counts once the end of its first result is within the budget.

Targets, so that an answer costs an agent fewer tokens than grep: the default page <= 1.0x `rg -n`
(stretch 0.8x); text + structuredContent <= 1.3x structuredContent; tools/list <= 8,800
characters, <= 7,000 of them what a model is shown (names, descriptions, input schemas); recall at
1k tokens ahead of semble.

Run: .venv/bin/python benchmarks/tokens.py [--corpora DIR] [--recall [--no-semble]]
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
from pathlib import Path
from typing import Any

sys.path[0] = str(Path(__file__).resolve().parents[1])  # benchmarks/regex.py must not shadow `regex`

from fastmcp import Client
from mcp_types import Implementation

from benchmarks.report import Report, add_report_argument, command, verdict
from search_engine.config import EngineConfig
from search_engine.embedding.embedder import resolve_model
from search_engine.regex.ripgrep import rg_path
from server.app import build_app
from server.output import CHARS_PER_TOKEN
from server.page_text import page_records
from server.proxy.app import build_proxy_app
from server.proxy.backends import command_backend
from server.settings import load_settings
from server.tools.registry import own_tools

DEFAULT_CORPORA = Path.home() / ".cache" / "codepager-bench"
BENCH = Path("/work/shared/bench")
#: name -> (corpora folder, annotations folder); `multilang/unpack` unpacks the second set.
RECALL_SETS = {
    "python": (DEFAULT_CORPORA, BENCH / "annotations"),
    "multilang": (Path.home() / ".cache" / "codepager-bench-multilang", BENCH / "multilang" / "annotations"),
}
BUDGETS = (1000, 2000, 4000)
TOP_K = 40
CORPORA = ("fastapi", "pydantic", "aiohttp")
PATTERNS = ("def ", "import ", "return ")
PAGE = 50
#: The clients of `server.clients`' table, and None for one that sends no clientInfo.
CLIENTS = ("claude-code", "codex-mcp-client", "cursor-vscode", None)
#: Shapes measured besides the default, as extra call arguments.
VARIANTS: dict[str, dict[str, Any]] = {
    "compact (default)": {},
    "compact, snippet_length=0": {"snippet_length": 0},
    "detail=full": {"detail": "full"},
}
TARGET_RATIO = 1.0
STRETCH_RATIO = 0.8
TARGET_WIRE = 1.3
#: tools/list's budgets (tests/test_compact_answers.py::TOOLS_LIST_BUDGET and MODEL_SHOWN_BUDGET).
TARGET_TOOLS_LIST = 6_000
TARGET_TOOLS_SHOWN = 5_000


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def rg_outputs(root: Path, pattern: str) -> tuple[list[str], str]:
    """`rg -n`'s first PAGE lines, and `rg --json`'s output up to the PAGE-th match event."""
    rg = rg_path()
    lines = subprocess.run(
        [rg, "--no-config", "--sort", "path", "-n", pattern], cwd=root, capture_output=True, text=True, check=True
    ).stdout.splitlines(keepends=True)[:PAGE]
    events = subprocess.run(
        [rg, "--no-config", "--sort", "path", "--json", pattern], cwd=root, capture_output=True, text=True, check=True
    ).stdout.splitlines(keepends=True)
    kept, seen = [], 0
    for line in events:
        kept.append(line)
        seen += json.loads(line)["type"] == "match"
        if seen == PAGE:
            break
    return lines, "".join(kept)


def settings_for(root: Path, work: Path) -> Any:
    return load_settings(
        None,
        {
            "server": {"roots": [root]},
            "index": {"cache_dir": work / "cache", "index_on_start": False},
            "sessions": {"secret_key": "tokens-benchmark-secret-key-0123456789"},
            "offload": {"output_dir": work / "offload"},
        },
    )


async def measure_corpus(root: Path, work: Path) -> list[dict[str, Any]]:
    app = build_app(settings_for(root, work))
    rows = []
    for pattern in PATTERNS:
        rg_n, rg_json = rg_outputs(root, pattern)
        row: dict[str, Any] = {
            "corpus": root.name,
            "pattern": pattern,
            "rg -n": len("".join(rg_n)) / PAGE,
            "rg --json": len(rg_json) / PAGE,
        }
        async with Client(app) as c:
            for name, extra in VARIANTS.items():
                result = await c.call_tool("regex_search", {"pattern": pattern, "page_size": PAGE, **extra})
                row[name] = len(compact(result.structured_content)) / PAGE
                if name == "compact (default)":
                    got = [
                        f"{r['path']}:{r['line']}:{r['text']}\n"
                        for r in page_records(result.structured_content["results"])
                    ]
                    assert got == rg_n, f"{root.name} {pattern!r}: the page is not rg -n's first {PAGE} matches"
            legacy = await c.call_tool("regex_search", {"pattern": pattern, "page_size": PAGE, "output_mode": "legacy"})
            row["output_mode=legacy (text)"] = len(legacy.content[0].text) / PAGE
        for client in CLIENTS:
            info = Implementation(name=client, version="1.0") if client else None
            async with Client(app, client_info=info) as c:
                result = await c.call_tool("regex_search", {"pattern": pattern, "page_size": PAGE})
            structured = len(compact(result.structured_content))
            row[f"wire {client or 'unknown'}"] = (structured + len(result.content[0].text)) / structured
        rows.append(row)
    return rows


def listed_size(tools: list[Any]) -> int:
    return len(compact([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]))


def shown_size(tools: list[Any]) -> int:
    """What of tools/list a model is shown: each tool's name, description and input schema."""
    return len(compact([{"name": t.name, "description": t.description, "inputSchema": t.input_schema} for t in tools]))


async def tools_list_sizes(root: Path, work: Path) -> tuple[dict[str, int], tuple[str, ...]]:
    """tools/list sizes in characters (the default server's, all and what a model is shown; what
    the proxy adds), and the names of the tools the proxy adds."""
    async with Client(build_app(settings_for(root, work))) as c:
        tools = list(await c.list_tools())
        server, shown = listed_size(tools), shown_size(tools)
    backend = command_backend(
        [str(Path(sys.executable).parent / "codepager"), "serve", "--root", str(root)], timeout_s=120
    )
    proxy = build_proxy_app(
        load_settings(None, {"proxy": {"data_dir": work / "data"}, "offload": {"output_dir": work / "offload"}}),
        [backend],
    )
    async with Client(proxy, timeout=120, init_timeout=120) as c:
        injected = listed_size([t for t in await c.list_tools() if t.name in own_tools(proxy)])
    return {"server": server, "server_shown": shown, "proxy_injected": injected}, own_tools(proxy)


def file_ends(page: dict[str, Any]) -> list[tuple[str, int]]:
    """Each file of a compact ranked page, in order, with the offset in the page's compact JSON
    at which its first result ends (the page opens with search, then results.mode, then files)."""
    head = {"search": page["search"], "results": {"mode": page["results"]["mode"], "files": {}}}
    shown: dict[str, Any] = head["results"]["files"]
    ends = []
    for path, entries in page["results"]["files"].items():
        key, entry = next(iter(entries.items()))
        shown[path] = {key: entry}
        ends.append((path, len(compact(head)) - len("}}}")))
        shown[path] = entries
    return ends


async def codepager_answers(corpora: Path, annotations: Path, cache: Path, work: Path) -> list[dict[str, Any]]:
    rows = []
    for ann in sorted(annotations.glob("*.json")):
        settings = load_settings(
            None,
            {
                "server": {"roots": [corpora / ann.stem]},
                "index": {"cache_dir": cache, "ready_wait_s": 1800, "index_on_start": True, "model": "static"},
                "sessions": {"secret_key": "tokens-benchmark-secret-key-0123456789"},
                "offload": {"output_dir": work / "offload"},
            },
        )
        async with Client(build_app(settings), timeout=1800) as c:
            for item in json.loads(ann.read_text()):
                result = await c.call_tool(
                    "hybrid_search", {"query": item["query"], "top_k": TOP_K, "page_size": TOP_K}
                )
                page = result.structured_content
                rows.append(
                    {"repo": ann.stem, "query": item["query"], "ends": file_ends(page), "chars": len(compact(page))}
                )
    return rows


def semble_answers(corpora: Path, annotations: Path, cache: Path, work: Path, python: Path) -> list[dict[str, Any]]:
    model = Path(resolve_model(EngineConfig(cache_dir=cache, embedding_profile="static")).source)
    out = work / f"semble-{annotations.parent.name}.jsonl"
    env = {**os.environ, "SEMBLE_MODEL_NAME": str(model), "HF_HUB_OFFLINE": "1"}
    worker = Path(__file__).resolve().parent / "semble_answers_worker.py"
    subprocess.run(
        [str(python), str(worker), str(corpora), str(annotations), str(out), str(TOP_K)],
        check=True,
        env=env,
        cwd=tempfile.gettempdir(),
        capture_output=True,
    )
    return [json.loads(line) for line in out.read_text().splitlines()]


def recall_at(rows: list[dict[str, Any]], annotations: Path, budget_tokens: int) -> float:
    """Share of queries with a relevant file whose first result ends within the budget."""
    relevant = {
        (ann.stem, item["query"]): set(item["relevant"])
        for ann in annotations.glob("*.json")
        for item in json.loads(ann.read_text())
    }
    limit = budget_tokens * CHARS_PER_TOKEN  # `ends` are character offsets
    found = sum(
        any(path in relevant[(r["repo"], r["query"])] and end <= limit for path, end in r["ends"]) for r in rows
    )
    return found / len(relevant)


def recall_table(results: dict[str, dict[str, list[float]]]) -> str:
    lines = [
        "| set | system | " + " | ".join(f"{b // 1000}k tokens" for b in BUDGETS) + " |",
        "|---" * (len(BUDGETS) + 2) + "|",
    ]
    for name, systems in results.items():
        for system, shares in systems.items():
            lines.append(f"| {name} | {system} | " + " | ".join(f"{x:.3f}" for x in shares) + " |")
    return "\n".join(lines)


def measure_recall(args: argparse.Namespace, work: Path) -> dict[str, dict[str, list[float]]]:
    results: dict[str, dict[str, list[float]]] = {}
    for name, (corpora, labels) in RECALL_SETS.items():
        systems = {"codepager hybrid": asyncio.run(codepager_answers(corpora, labels, args.cache, work / name))}
        if not args.no_semble:
            systems["semble 0.7.0"] = semble_answers(corpora, labels, args.cache, work, args.semble_python)
        results[name] = {s: [recall_at(rows, labels, b) for b in BUDGETS] for s, rows in systems.items()}
    return results


def table(rows: list[dict[str, Any]]) -> str:
    shapes = ["rg -n", "rg --json", *VARIANTS, "output_mode=legacy (text)"]
    lines = ["| corpus | pattern | " + " | ".join(shapes) + " | default / rg -n |", "|---" * (len(shapes) + 3) + "|"]
    for r in rows:
        cells = " | ".join(f"{r[s]:.1f}" for s in shapes)
        lines.append(f"| {r['corpus']} | `{r['pattern']}` | {cells} | **{r['compact (default)'] / r['rg -n']:.2f}x** |")
    clients = [f"wire {c or 'unknown'}" for c in CLIENTS]
    lines += [
        "",
        "| corpus | pattern | " + " | ".join(c.removeprefix("wire ") for c in clients) + " |",
        "|---" * (len(clients) + 2) + "|",
    ]
    for r in rows:
        lines.append(f"| {r['corpus']} | `{r['pattern']}` | " + " | ".join(f"{r[c]:.2f}x" for c in clients) + " |")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> Report:
    with tempfile.TemporaryDirectory(prefix="codepager-tokens-") as tmp:
        work = Path(tmp)
        rows = []
        for name in args.names:
            rows += asyncio.run(measure_corpus(args.corpora / name, work / name))
        sizes, proxy_tools = asyncio.run(tools_list_sizes(args.corpora / args.names[0], work / "list"))
        recall = measure_recall(args, work) if args.recall else {}
    ratios = [r["compact (default)"] / r["rg -n"] for r in rows]
    worst, median = max(ratios), statistics.median(ratios)
    structured_clients = [r[f"wire {c}"] for r in rows for c in ("claude-code", "codex-mcp-client")]
    small_list = sizes["server"] <= TARGET_TOOLS_LIST and sizes["server_shown"] <= TARGET_TOOLS_SHOWN
    met = worst <= TARGET_RATIO and max(structured_clients) <= TARGET_WIRE and small_list
    markdown = "\n".join(
        [
            f"chars per match on page 1 of `regex_search page_size={PAGE}` (structuredContent, compact JSON, envelope "
            "included) against what ripgrep prints for the same matches:",
            "",
            table(rows),
            "",
            f"- default page vs `rg -n`: median **{median:.2f}x**, worst {worst:.2f}x "
            f"(target <= {TARGET_RATIO}x: {verdict(worst <= TARGET_RATIO)}; stretch {STRETCH_RATIO}x: "
            f"{verdict(worst <= STRETCH_RATIO)})",
            f"- text + structuredContent over structuredContent: clients that show structuredContent only "
            f"(Claude Code, Codex) at most {max(structured_clients):.2f}x (target <= {TARGET_WIRE}x: "
            f"{verdict(max(structured_clients) <= TARGET_WIRE)}); clients that show text (Cursor) or are unknown "
            "get the grep-like text as well, by design (see docs/tools.md, Client budgets)",
            f"- tools/list: {sizes['server']:,} chars for the default server, {sizes['server_shown']:,} of them "
            f"shown to a model (targets <= {TARGET_TOOLS_LIST:,} and {TARGET_TOOLS_SHOWN:,}: {verdict(small_list)}); "
            f"the proxy adds {sizes['proxy_injected']:,} chars for {', '.join(proxy_tools)}",
        ]
    )
    headline = (
        f"default page {median:.2f}x rg -n chars per match (worst {worst:.2f}x); tools/list {sizes['server']:,} chars "
        f"({sizes['server_shown']:,} shown to a model)"
    )
    if recall:
        ahead = [s["codepager hybrid"][0] > s["semble 0.7.0"][0] for s in recall.values() if "semble 0.7.0" in s]
        markdown += (
            "\n\nRecall at a token budget (share of queries whose relevant file is within the first N tokens "
            "of the answer, top_k " + str(TOP_K) + "):\n\n" + recall_table(recall)
        )
        if ahead:
            markdown += (
                f"\n\n- ahead of semble at 1k tokens on {sum(ahead)} of {len(ahead)} sets: {verdict(all(ahead))}"
            )
            met = met and all(ahead)
        python = recall.get("python", {})
        if "semble 0.7.0" in python:
            headline += (
                f"; recall@1k tokens {python['codepager hybrid'][0]:.3f} "
                f"vs semble {python['semble 0.7.0'][0]:.3f} (Python set)"
            )
    return Report(markdown, headline, {"rows": rows, "tools_list": sizes, "recall": recall}, target_met=met)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpora", type=Path, default=DEFAULT_CORPORA, help="fetch-corpora's folder")
    p.add_argument("--names", type=lambda v: v.split(","), default=list(CORPORA), metavar="A,B")
    p.add_argument("--recall", action="store_true", help="also measure recall at 1k/2k/4k tokens (indexes 12 repos)")
    p.add_argument(
        "--cache",
        type=Path,
        default=DEFAULT_CORPORA / "codepager" / "profile-static",
        help="index cache dir (default: retrieval.py's, so its indexes are reused)",
    )
    p.add_argument("--semble-python", type=Path, default=Path("/work/semble-venv/bin/python"))
    p.add_argument("--no-semble", action="store_true", help="leave the peer out of the recall table")
    add_report_argument(p)
    return p


main = command(parser, run)


if __name__ == "__main__":
    sys.exit(main())
