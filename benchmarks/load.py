"""Load, soak and fault runs against real `codepager serve --transport http` processes on
127.0.0.1 (bounded loops, loopback only). Not unit tests: they take minutes and print numbers.

- load: N concurrent MCP clients x M searches each (60% regex page walks, 40% hybrid walks)
  against one server with a built index. Every walk is checked complete (all pages, no
  duplicates, as many matches as the first page announced). Reports errors and p50/p99.
- soak: S searches with distinct parameters against a server with small limits (50 sessions,
  a 32 MB session budget, offload retention of 10 s), every 5th offloaded to a file. Samples
  the server's RSS from /proc, the offload dir, and its in-process session store (count and
  bytes, read inside the server by a harness thread); repeated with the Redis backend, where
  the session count and stored bytes are read from Redis after every search.
- faults: SIGTERM and SIGKILL of a server in the middle of indexing an edited tree; then the
  index on disk must still be the last complete generation, and the next run must finish from
  it (re-embedding the edited files only, not rebuilding).

Exits 1, naming each, if any walk failed or was incomplete, any bound did not hold (sessions,
stored bytes, RSS, offload age), the index did not survive a signal intact, or a server wrote a
traceback.

Run: .venv/bin/python benchmarks/load.py [--clients 50] [--searches 20] [--soak 2000]
     [--only load,soak,faults] [--out results.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis
from fastmcp import Client

from harness.http_server import HttpServer
from harness.patched import patched_codepager_cmd
from harness.redis_server import RedisServer
from server.output.offload import SWEEP_INTERVAL_S as OFFLOAD_SWEEP_S
from sessions import DEFAULT_NAMESPACE

SECRET = "load-benchmark-secret-0123456789"
# On the 150-file load tree these match from 150 to 1,800 lines: walks of 1 to 36 pages.
CHORES = ["retry with backoff", "parse config", "check input"]
REGEX_PATTERNS = ["TODO", r"class \w+Error", r"retry|backoff", "import os", r"\bcache\b", r"log\('(http|auth)'"]
HYBRID_QUERIES = [
    "retry with exponential backoff",
    "parse the configuration file",
    "http request handler",
    "cache eviction policy",
    "validate user input",
    "open a database connection",
    "render a template",
]
TOPICS = ["retry", "config", "http", "cache", "validate", "database", "template", "auth", "queue", "metrics"]


def make_tree(root: Path, files: int, seed: int = 1) -> None:
    """A repository-like tree: modules of small functions on a few topics, so regex patterns
    hit from a handful to ~thousands of lines and hybrid queries have real answers."""
    rnd = random.Random(seed)
    for i in range(files):
        topic = TOPICS[i % len(TOPICS)]
        lines = [f'"""{topic} helpers, module {i}."""', "import os", ""]
        for j in range(12):
            lines += [
                f"def handle_{topic}_{i}_{j}(request, cache=None):",
                f'    """Handle a {topic} request: {rnd.choice(CHORES)}."""',
                f"    value = compute_{topic}(request, attempt={j})",
                "    # TODO: tighten error handling" if j % 4 == 0 else f"    log('{topic}', value)",
                f"    return finish_{topic}(value)",
                "",
            ]
        lines.append(f"class {topic.title()}Error(Exception):\n    pass\n")
        path = root / f"pkg{i % 8}" / f"{topic}_{i:04d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines))


def base_env(tmp: Path, **settings: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "CODEPAGER_INDEX__CACHE_DIR": str(tmp / "cache"),
            "CODEPAGER_SESSIONS__SECRET_KEY": SECRET,
            "CODEPAGER_OFFLOAD__OUTPUT_DIR": str(tmp / "offload"),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
    )
    env.update({f"CODEPAGER_{k.upper()}": v for k, v in settings.items()})
    return env


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def body(result: Any) -> dict[str, Any]:
    if result.is_error:
        raise RuntimeError(f"tool error: {json.dumps(result.structured_content)[:300]}")
    content: dict[str, Any] = result.structured_content
    return content


async def wait_index_ready(server: HttpServer, timeout_s: float = 600) -> float:
    started = time.monotonic()
    async with server.client() as client:
        while time.monotonic() - started < timeout_s:
            status = body(await client.call_tool("index_status", {}))
            if status["error"]:
                raise RuntimeError(f"indexing failed: {status['error']}")
            if status["exists"] and not status["building"]:
                return time.monotonic() - started
            await asyncio.sleep(0.5)
    raise TimeoutError("index not ready")


# -- load -----------------------------------------------------------------------------------


@dataclass
class LoadStats:
    first_ms: list[float] = field(default_factory=list)
    next_ms: list[float] = field(default_factory=list)
    walks: int = 0
    complete_walks: int = 0
    errors: list[str] = field(default_factory=list)


async def walk(client: Client[Any], tool: str, args: dict[str, Any], stats: LoadStats) -> None:
    """One search and its page walk; checks the walk is complete and duplicate-free."""
    stats.walks += 1
    t0 = time.perf_counter()
    page = body(await client.call_tool(tool, args))
    stats.first_ms.append((time.perf_counter() - t0) * 1000)
    total = page["results"]["total_count"]
    seen = [_identity(m) for m in page["results"]["matches"]]
    while (cursor := page["pagination"]["next_cursor"]) is not None:
        t0 = time.perf_counter()
        page = body(await client.call_tool(tool, {"cursor": cursor, "output_mode": "inline", "detail": "full"}))
        stats.next_ms.append((time.perf_counter() - t0) * 1000)
        seen += [_identity(m) for m in page["results"]["matches"]]
    if len(seen) == total == len(set(seen)):
        stats.complete_walks += 1
    else:
        stats.errors.append(
            f"incomplete walk {tool} {args}: {len(seen)} seen, {len(set(seen))} distinct, {total} announced"
        )


def _identity(match: dict[str, Any]) -> tuple[Any, ...]:
    """A match's place, down to its bytes (two matches on one line differ): why the walks ask
    for `detail="full"` pages, whose records carry the byte span the compact ones leave out."""
    span = match["match"]["span"]
    return match["file"]["path"], span["line_start"], span["byte_start"], span["byte_end"]


async def one_client(server: HttpServer, client_no: int, searches: int, stats: LoadStats) -> None:
    rnd = random.Random(client_no)
    async with server.client(timeout=120) as client:
        for j in range(searches):
            try:
                if (client_no + j) % 5 < 2:
                    query = rnd.choice(HYBRID_QUERIES)
                    await walk(
                        client,
                        "hybrid_search",
                        {"query": query, "top_k": 30, "page_size": 10, "output_mode": "inline", "detail": "full"},
                        stats,
                    )
                else:
                    pattern = rnd.choice(REGEX_PATTERNS)
                    page_size = rnd.choice([50, 100, 200])
                    await walk(
                        client,
                        "regex_search",
                        {"pattern": pattern, "page_size": page_size, "output_mode": "inline", "detail": "full"},
                        stats,
                    )
            except Exception as exc:
                stats.errors.append(f"client {client_no}: {type(exc).__name__}: {exc}"[:300])


def run_load(tmp: Path, clients: int, searches: int) -> dict[str, Any]:
    root = tmp / "load-repo"
    make_tree(root, files=150)
    server = HttpServer(root, base_env(tmp, index__index_on_start="true")).start()
    try:
        index_s = asyncio.run(wait_index_ready(server))
        rss_before = rss_mb(server.pid)
        stats = LoadStats()

        async def all_clients() -> None:
            await asyncio.gather(*(one_client(server, c, searches, stats) for c in range(clients)))

        started = time.perf_counter()
        asyncio.run(all_clients())
        wall_s = time.perf_counter() - started
        rss_after = rss_mb(server.pid)
    finally:
        stderr = server.stop()
    calls = len(stats.first_ms) + len(stats.next_ms)
    every = stats.first_ms + stats.next_ms
    return {
        "clients": clients,
        "searches_per_client": searches,
        "searches": stats.walks,
        "complete_walks": stats.complete_walks,
        "calls": calls,
        "errors": len(stats.errors),
        "error_samples": stats.errors[:5],
        "wall_s": round(wall_s, 1),
        "calls_per_s": round(calls / wall_s, 1),
        "p50_ms": round(pct(every, 0.50), 1),
        "p99_ms": round(pct(every, 0.99), 1),
        "first_page_p50_ms": round(pct(stats.first_ms, 0.50), 1),
        "first_page_p99_ms": round(pct(stats.first_ms, 0.99), 1),
        "next_page_p50_ms": round(pct(stats.next_ms, 0.50), 1),
        "next_page_p99_ms": round(pct(stats.next_ms, 0.99), 1),
        "index_build_s": round(index_s, 1),
        "server_rss_mb": {"before": round(rss_before), "after": round(rss_after)},
        "server_stderr_tracebacks": stderr.count("Traceback"),
    }


# -- soak -----------------------------------------------------------------------------------

SOAK_SESSIONS = 50  # not a setting: the soak's servers start with server.app.MAX_SESSIONS patched to it
SOAK_BUDGET_MB = 32
SOAK_RETENTION_S = 10.0
SOAK_SWEEP_S = OFFLOAD_SWEEP_S  # not a setting: an offload file outlives its retention by up to this
RSS_ALLOWANCE_MB = 64  # allocator slack, HTTP buffers, per-request transients


def soak_args(i: int) -> dict[str, Any]:
    """Distinct parameters for every i: each is a new session (~1,000-3,000 matches)."""
    pattern = [r"def handle_\w+", r"return \w+\(", r"value = compute_\w+"][i % 3] + f"|no_such_{i}"
    args: dict[str, Any] = {"pattern": pattern, "page_size": 50, "output_mode": "inline", "detail": "full"}
    if i % 5 == 0:
        args["output_mode"] = "file_ref"
    if i % 7 == 0:
        args["include_patterns"] = [f"pkg{i % 8}/*.py"]
    return args


async def soak_loop(server: HttpServer, n: int, on_search: Any, workers: int = 4) -> list[str]:
    errors: list[str] = []
    counter = iter(range(n))

    async def worker() -> None:
        async with server.client(timeout=120) as client:
            for i in counter:
                try:
                    page = body(await client.call_tool("regex_search", soak_args(i)))
                    if i % 10 == 0 and page["pagination"]["next_cursor"]:
                        body(await client.call_tool("regex_search", {"cursor": page["pagination"]["next_cursor"]}))
                except Exception as exc:
                    errors.append(f"{i}: {type(exc).__name__}: {exc}"[:300])
                on_search(i)

    await asyncio.gather(*(worker() for _ in range(workers)))
    return errors


def offload_state(directory: Path) -> tuple[int, float]:
    """(files, age of the oldest in seconds) of the offload dir. The server's sweeper removes
    expired files while this looks: one listed and gone by its stat no longer counts."""
    now = time.time()
    ages = []
    for path in directory.glob("*.jsonl") if directory.is_dir() else ():
        try:
            ages.append(now - path.stat().st_mtime)
        except FileNotFoundError:
            continue
    return len(ages), max(ages, default=0.0)


SOAK_LIMITS = {
    "sessions__max_memory_mb": str(SOAK_BUDGET_MB),
    "offload__retention_hours": str(SOAK_RETENTION_S / 3600),
    "index__index_on_start": "false",
}


def soak_tree(tmp: Path) -> Path:
    root = tmp / "soak-repo"
    if not root.is_dir():
        make_tree(root, files=400, seed=2)
    return root


# `codepager serve ...` with a thread that writes the session store's stats (now, and the
# largest seen) to argv[1] every 20 ms: the in-process store can only be read from inside.
SAMPLED_SERVE = (
    f"import server.app\nserver.app.MAX_SESSIONS = {SOAK_SESSIONS}\n"
    + """
import json, os, sys, threading, time
from dataclasses import asdict
from server.app import build_app, build_services
from server.cli import build_parser
from server.cli.serve_cmd import serve_app, server_overrides, server_settings

stats_path = sys.argv[1]
args = build_parser().parse_args(sys.argv[2:])
settings = server_settings(args.config, server_overrides(args))
services = build_services(settings)

def sample():
    peak = {}
    while True:
        now = asdict(services.pager.store.stats())
        peak = {k: max(v, peak.get(k, 0)) for k, v in now.items()}
        with open(stats_path + ".tmp", "w") as f:
            json.dump({"now": now, "max": peak}, f)
        os.replace(stats_path + ".tmp", stats_path)
        time.sleep(0.02)

threading.Thread(target=sample, name="store-sampler", daemon=True).start()
sys.exit(serve_app(build_app(settings, services), settings.server))
"""
)


def store_stats(path: Path) -> dict[str, dict[str, int]]:
    """The sampled server's latest {"now": stats, "max": largest so far} (see SAMPLED_SERVE)."""
    stats: dict[str, dict[str, int]] = json.loads(path.read_text())
    return stats


def run_soak_memory(tmp: Path, searches: int) -> dict[str, Any]:
    """In-process sessions: RSS of the server against the session budget, and the store's own
    count and bytes against its limits."""
    root, limits = soak_tree(tmp), SOAK_LIMITS
    mem_tmp = tmp / "soak-memory"
    stats_path = mem_tmp / "store-stats.json"
    mem_tmp.mkdir(parents=True, exist_ok=True)
    harness = [sys.executable, "-c", SAMPLED_SERVE, str(stats_path)]
    server = HttpServer(root, base_env(mem_tmp, **limits), program=harness).start()
    samples: list[float] = []
    sessions_seen: list[int] = []
    offload_max = [0, 0.0]
    baseline: list[float] = []
    start: list[float] = []
    trajectory: list[int] = []

    def sample(i: int) -> None:
        if i == 0:
            start.append(rss_mb(server.pid))
        if i == 100:
            baseline.append(rss_mb(server.pid))
        if i % 250 == 0:
            trajectory.append(round(rss_mb(server.pid)))
        if i % 10 == 0:
            samples.append(rss_mb(server.pid))
            sessions_seen.append(store_stats(stats_path)["now"]["sessions"])
            files, oldest = offload_state(mem_tmp / "offload")
            offload_max[0] = max(offload_max[0], files)
            offload_max[1] = max(offload_max[1], oldest)

    try:
        started = time.perf_counter()
        errors = asyncio.run(soak_loop(server, searches, sample))
        wall = time.perf_counter() - started
        final = rss_mb(server.pid)
        time.sleep(0.1)  # a last sample after the last search
        store = store_stats(stats_path)["max"]
    finally:
        stderr = server.stop()
    # The baseline is the server after one search: interpreter, libraries, caches. The
    # sessions held afterwards must fit the budget (plus the stated allowance).
    base = start[0]
    peak = max(*samples, final)
    return {
        "searches": searches,
        "malloc_arena_max": os.environ.get("MALLOC_ARENA_MAX", "glibc default"),
        "rss_every_250_mb": trajectory,
        "errors": len(errors),
        "error_samples": errors[:5],
        "wall_s": round(wall, 1),
        "rss_baseline_mb": round(base, 1),
        "rss_after_100_mb": round(baseline[0], 1) if baseline else None,
        "rss_peak_mb": round(peak, 1),
        "rss_final_mb": round(final, 1),
        "session_budget_mb": SOAK_BUDGET_MB,
        "rss_allowance_mb": RSS_ALLOWANCE_MB,
        "rss_held": peak <= base + SOAK_BUDGET_MB + RSS_ALLOWANCE_MB,
        "sessions_sampled": len(sessions_seen),
        "sessions_max": store["sessions"],
        "session_limit": SOAK_SESSIONS,
        "stored_mb_max": round(store["bytes"] / 2**20, 2),
        "stored_budget_mb": SOAK_BUDGET_MB,
        "sessions_held": store["sessions"] <= SOAK_SESSIONS and store["bytes"] <= SOAK_BUDGET_MB * 2**20,
        "evictions": store["evictions"],
        "offload_files_max": offload_max[0],
        "offload_oldest_s_max": round(offload_max[1], 1),
        "offload_bound_s": SOAK_RETENTION_S + SOAK_SWEEP_S + 5,
        "offload_held": offload_max[1] <= SOAK_RETENTION_S + SOAK_SWEEP_S + 5,
        "server_stderr_tracebacks": stderr.count("Traceback"),
    }


def run_soak_redis(tmp: Path, searches: int) -> dict[str, Any]:
    """Redis sessions: count and bytes read from Redis after every search."""
    root, limits = soak_tree(tmp), SOAK_LIMITS
    red_tmp = tmp / "soak-redis"
    redis_srv = RedisServer(red_tmp / "redis").start()
    namespace = DEFAULT_NAMESPACE  # the Redis server is this soak's own
    cmd, args = patched_codepager_cmd({"server.app.MAX_SESSIONS": SOAK_SESSIONS})
    env = base_env(red_tmp, sessions__backend=redis_srv.url, **limits)
    server = HttpServer(root, env, program=[cmd, *args]).start()
    probe = redis.Redis.from_url(redis_srv.url)
    counts: list[int] = []
    stored: list[int] = []

    def sample_redis(i: int) -> None:
        counts.append(probe.zcard(f"codepager:{namespace}:lru"))
        stored.append(int(probe.get(f"codepager:{namespace}:bytes") or 0))

    try:
        started = time.perf_counter()
        errors = asyncio.run(soak_loop(server, searches, sample_redis))
        wall = time.perf_counter() - started
        used_memory = probe.info("memory")["used_memory"]
        evictions = int(probe.hget(f"codepager:{namespace}:stats", "evictions") or 0)
        rss = rss_mb(server.pid)
    finally:
        stderr = server.stop()
        probe.close()
        redis_srv.stop()
    return {
        "searches": searches,
        "errors": len(errors),
        "error_samples": errors[:5],
        "wall_s": round(wall, 1),
        "sessions_max": max(counts),
        "session_limit": SOAK_SESSIONS,
        "stored_mb_max": round(max(stored) / 2**20, 2),
        "stored_budget_mb": SOAK_BUDGET_MB,
        "held": max(counts) <= SOAK_SESSIONS and max(stored) <= SOAK_BUDGET_MB * 2**20,
        "evictions": evictions,
        "redis_used_memory_mb": round(used_memory / 2**20, 1),
        "server_rss_final_mb": round(rss, 1),
        "server_stderr_tracebacks": stderr.count("Traceback"),
    }


# -- faults ---------------------------------------------------------------------------------


def _index_json(env: dict[str, str], *args: str) -> dict[str, Any]:
    """Run `codepager index --json <args>` and return the JSON it prints."""
    out = subprocess.run(
        [str(Path(sys.executable).parent / "codepager"), "index", "--json", *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def index_status(root: Path, env: dict[str, str]) -> dict[str, Any]:
    return _index_json(env, "--status", str(root))


def index_update(root: Path, env: dict[str, str]) -> dict[str, Any]:
    return _index_json(env, "--no-progress", str(root))


async def wait_for_phase(server: HttpServer, phase: str, timeout_s: float = 300) -> dict[str, Any]:
    started = time.monotonic()
    async with server.client() as client:
        while time.monotonic() - started < timeout_s:
            status = body(await client.call_tool("index_status", {}))
            progress = status["progress"]
            if progress["phase"] == phase and progress["done"] > 0:
                return status
            if status["exists"] and not status["building"] and status["generation"] > 1:
                raise RuntimeError("indexing finished before it could be interrupted; use a bigger tree")
            await asyncio.sleep(0.05)
    raise TimeoutError(f"indexing never reached {phase}")


def interrupted_indexing(tmp: Path, sig: signal.Signals) -> dict[str, Any]:
    """Index v1, edit a third of the files, start a server that indexes in the background,
    send `sig` mid-embedding; the last generation must survive intact and the next update
    must finish from it."""
    work = tmp / f"fault-{sig.name.lower()}"
    root = work / "repo"
    make_tree(root, files=2500, seed=3)
    env = base_env(work)
    first = index_update(root, env)
    edited = 0
    for i, path in enumerate(sorted(root.rglob("*.py"))):
        if i % 3 == 0:
            path.write_text(path.read_text().replace("Handle a", "Process one") + "\n# edited\n")
            edited += 1
    server = HttpServer(root, base_env(work, index__index_on_start="true")).start()
    at = asyncio.run(wait_for_phase(server, "embed"))["progress"]
    assert server.proc is not None
    started = time.monotonic()
    server.proc.send_signal(sig)
    try:
        code = server.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        code = server.proc.wait()
    exit_s = time.monotonic() - started
    server.proc = None
    stderr = server.stderr()
    after_kill = index_status(root, env)
    resumed = index_update(root, env)
    return {
        "signal": sig.name,
        "interrupted_at": at,
        "exit_code": code,
        "exit_s": round(exit_s, 2),
        "aborted_or_traceback": ("terminate called" in stderr) or ("Traceback" in stderr),
        "generation_before": first["generation"],
        "generation_after_signal": after_kill["generation"],
        "index_intact": after_kill["exists"]
        and after_kill["generation"] == first["generation"]
        and after_kill["files"] == first["files"]
        and after_kill["stale_reason"] is None,
        "resumed": {
            k: resumed[k]
            for k in ("generation", "rebuilt", "files", "chunks", "modified", "chunks_embedded", "seconds")
        },
        "edited_files": edited,
        "resumed_incrementally": not resumed["rebuilt"]
        and resumed["modified"] == edited
        and resumed["generation"] == first["generation"] + 1,
        "full_build_chunks_embedded": first["chunks_embedded"],
    }


def run_faults(tmp: Path) -> dict[str, Any]:
    return {sig.name: interrupted_indexing(tmp, sig) for sig in (signal.SIGTERM, signal.SIGKILL)}


# Per section: the result keys that must be true, and those that must be zero.
MUST_HOLD: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "load": ((), ("errors", "server_stderr_tracebacks")),
    "soak-memory": (("rss_held", "offload_held", "sessions_held"), ("errors", "server_stderr_tracebacks")),
    "soak-redis": (("held",), ("errors", "server_stderr_tracebacks")),
}
FAULT_MUST_HOLD = ("index_intact", "resumed_incrementally")


def failures(results: dict[str, Any]) -> list[str]:
    """Every error, broken bound or incomplete walk in `results`, as one line each."""
    found: list[str] = []
    for section, (true_keys, zero_keys) in MUST_HOLD.items():
        result = results.get(section)
        if result is None:
            continue
        found += [f"{section}: {k} is false" for k in true_keys if not result[k]]
        found += [f"{section}: {k} = {result[k]} {result.get('error_samples', '')}" for k in zero_keys if result[k]]
    if "load" in results and results["load"]["complete_walks"] != results["load"]["searches"]:
        found.append(f"load: {results['load']['complete_walks']} of {results['load']['searches']} walks complete")
    for name, fault in results.get("faults", {}).items():
        found += [f"faults {name}: {k} is false" for k in FAULT_MUST_HOLD if not fault[k]]
        if fault["aborted_or_traceback"]:
            found.append(f"faults {name}: the server aborted or wrote a traceback")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--searches", type=int, default=20)
    parser.add_argument("--soak", type=int, default=2000)
    parser.add_argument(
        "--only", default="load,soak,faults", help="any of load, soak (= soak-memory,soak-redis), faults"
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    only = set(args.only.split(","))
    tmp = Path(tempfile.mkdtemp(prefix="codepager-load-"))
    results: dict[str, Any] = {"cpus": os.cpu_count()}
    try:
        if "load" in only:
            results["load"] = run_load(tmp, args.clients, args.searches)
            print(json.dumps({"load": results["load"]}, indent=1), flush=True)
        for name, run in (("soak-memory", run_soak_memory), ("soak-redis", run_soak_redis)):
            if name in only or "soak" in only:
                results[name] = run(tmp, args.soak)
                print(json.dumps({name: results[name]}, indent=1), flush=True)
        if "faults" in only:
            results["faults"] = run_faults(tmp)
            print(json.dumps({"faults": results["faults"]}, indent=1), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    failed = failures(results)
    for failure in failed:
        print(f"FAILED: {failure}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
