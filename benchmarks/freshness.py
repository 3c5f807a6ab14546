"""Freshness: what read-your-writes costs, on the sympy trees of the scale benchmark.

Per tree size (1x and 8x copies of sympy, `benchmarks.scale.monorepo`; the index is built once
into `--work` and reused), in one process, with the engine a server uses (`SearchEngine`, file
events, the default `fresh_wait_s`):

- stale answers: `--trials` immediate edit-then-search trials on random files, the kinds in
  turn (a function appended, a new file, a deletion, a rename of a file given a new function,
  20 lines inserted at the top of a file given a new function), each followed at once by two
  hybrid searches: for the new function, and for the first name the file defined before (its
  indexed chunks). A trial is stale when a result's text or lines are not the file's now, when
  a deleted or renamed-away path is answered, or when the new function is missing from an
  answer that does not say it is `updating`; an answer marked `updating` that leaves the
  changed file out counts as marked. Every `SETTLE_EVERY` trials the tree is put back and the
  fold awaited;
- search speed: warm hybrid p50 (8 queries x `--repeats`; wall time, and the calling
  thread's CPU time, which the machine's load sways less) through the engine with change
  detection live, against the same ranking with none (the generation's `Ranker` called
  directly) and against `index.watch = false` (the tree listed on every search);
- idle cost (the largest size): the CPU time of the process and of the live layer's kept
  chunking worker over `--idle-s` seconds of an idle watched tree, the resident memory a
  watcher of that tree adds, and the worker's proportional set size;
- one edit (the largest size): a function appended to a file, then the next hybrid search
  for it: how much longer it took than the same search just before the edit (`--edits` runs,
  p50), and whether it saw the edit;
- a checkout (the largest size): `--checkout` files rewritten at once by a writer thread
  while searches run back to back: the slowest of those searches, how many were marked
  (`updating` or `unverified`) and how long after the writer finished a search first answered
  `current` (everything folded in).

Every change is undone afterwards (the tree is the scale benchmark's, shared).

usage: python benchmarks/freshness.py [--sizes 1,8] [--trials 200] [--repeats 7]
       [--edits 15] [--checkout 1000] [--idle-s 20] [--work DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # as a script, benchmarks/regex.py would shadow the `regex` package

from benchmarks.report import Report, add_report_argument, emit, verdict
from benchmarks.scale import DEFAULT_SOURCE, DEFAULT_WORK, QUERIES, monorepo
from search_engine.config import EngineConfig
from search_engine.engine import SearchEngine
from search_engine.errors import InvalidQueryError
from search_engine.live.watcher import watch
from search_engine.models import Match, SearchMode, SearchRequest, SearchResult
from search_engine.ranking.code_tokens import validate_query
from search_engine.ranking.search import Ranker

KINDS = ("append", "new file", "delete", "rename", "insert 20 lines")
SPEED_RATIO = 1.1
EDIT_ADDED_MS = 100.0
CHECKOUT_ANSWER_S = 1.0
CHECKOUT_FOLDED_S = 30.0
IDLE_CORE_SHARE = 0.01
IDLE_MB = 50.0
# Trials between putting the tree back: each changes at most two paths, and the live layer
# takes up to `live_layer.MAX_LIVE_FILES` (16) before a search waits for the fold.
SETTLE_EVERY = 6


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1,8", help="tree sizes (copies of sympy), comma-separated")
    p.add_argument("--trials", type=int, default=200, help="edit-then-search trials per size")
    p.add_argument("--repeats", type=int, default=7, help="runs of each query for the warm p50")
    p.add_argument("--edits", type=int, default=15, help="one-edit runs (largest size)")
    p.add_argument("--checkout", type=int, default=1000, help="files rewritten at once (largest size)")
    p.add_argument("--idle-s", type=float, default=20.0, help="idle time measured (largest size)")
    p.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    p.add_argument("--work", type=Path, default=DEFAULT_WORK)
    add_report_argument(p)
    return p


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Bench:
    """One tree, its prebuilt index and a warm engine over it."""

    def __init__(self, work: Path, source: Path, copies: int) -> None:
        self.root = monorepo(source, work, copies).resolve()
        self.cache = work / f"freshness-cache-{copies}x"
        self.engine = SearchEngine(EngineConfig(cache_dir=self.cache))
        self.engine.indexes.embedder.embed(["warm up"])
        self.search(QUERIES[0])  # builds the index on the first run, then opens it
        self.py_files = sorted(p.relative_to(self.root).as_posix() for p in self.root.rglob("*.py"))
        self.saved: dict[str, bytes | None] = {}  # what to put back: None = remove

    def search(self, query: str) -> SearchResult:
        return self.engine.search(SearchRequest(mode=SearchMode.HYBRID, query=query, root=str(self.root), top_k=10))

    def settle(self) -> None:
        self.search(QUERIES[0])
        self.engine.indexes.wait_idle(self.root, 120)

    def remember(self, rel: str) -> None:
        if rel not in self.saved:
            path = self.root / rel
            self.saved[rel] = path.read_bytes() if path.exists() else None

    def write(self, rel: str, data: bytes) -> None:
        self.remember(rel)
        (self.root / rel).write_bytes(data)

    def restore(self) -> None:
        for rel, data in self.saved.items():
            path = self.root / rel
            if data is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(data)
        self.saved.clear()
        self.settle()

    def close(self) -> None:
        self.restore()
        self.engine.close()


def untrue(root: Path, match: Match) -> bool:
    """The match's text or lines are not the file's now."""
    try:
        data = (root / match.path).read_bytes()
    except OSError:
        return True
    return (
        data[match.byte_start : match.byte_end].decode("utf-8", "replace") != match.content
        or data[: match.byte_start].count(b"\n") + 1 != match.line_start
    )


def defined(data: bytes) -> str | None:
    """The first name a file defines at its top level that is a valid query (None if none):
    a query that finds the file's indexed chunks."""
    for found in re.finditer(rb"^(?:def|class) (\w+)", data, re.M):
        name = found.group(1).decode()
        try:
            validate_query(name)
        except InvalidQueryError:
            continue
        return name
    return None


def trial(b: Bench, n: int, kind: str, rng: random.Random) -> str:
    """One change, then at once the searches that would show it stale: 'fresh', 'marked'
    (left out, and the answer says so) or 'stale'."""
    # A name no other file shares a word with: found first by BM25 and by symbol, if it is there.
    name = "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(14))
    func = f"\n\ndef {name}(value):\n    return value + {n}\n".encode()
    target = rng.choice(b.py_files)
    data = (b.root / target).read_bytes()
    old_name = defined(data)
    expect: str | None = target  # where `name` must be found (None: nowhere)
    gone: str | None = None  # a path no result may come from
    if kind == "append":
        b.write(target, data + func)
    elif kind == "new file":
        expect = f"{target.rsplit('/', 1)[0]}/zq_new_{n}.py"
        b.write(expect, func)
    elif kind == "insert 20 lines":  # the file's indexed lines all move down 20
        b.write(target, b"".join(b"# inserted line %d\n" % i for i in range(20)) + data + func)
    elif kind == "delete":
        b.remember(target)
        (b.root / target).unlink()
        expect, gone = None, target
    else:  # rename, with a new function in it
        b.write(target, data + func)
        expect, gone = target[: -len(".py")] + "_renamed.py", target
        b.remember(expect)
        (b.root / target).rename(b.root / expect)
    outcome = "fresh"
    for query in (name, old_name) if old_name else (name,):
        result = b.search(query)
        fresh = result.freshness
        wrong = [m for m in result.matches if untrue(b.root, m) or m.path == gone]
        missing = query == name and expect is not None and not any(m.path == expect for m in result.matches)
        if not wrong and not missing:
            continue
        if not wrong and fresh is not None and fresh.state != "current" and fresh.pending_count > 0:
            outcome = "marked"
            continue
        shown = [(m.path, m.line_start, m.content[:60]) for m in wrong or result.matches[:3]]
        print(f"stale: {kind} {target} {query!r} expecting {expect}: {fresh} {shown}", file=sys.stderr)
        return "stale"
    return outcome


def trials(b: Bench, count: int) -> dict[str, Any]:
    """`count` trials, the kinds in turn; every `SETTLE_EVERY` the tree is put back and the
    fold awaited, so the changes pending stay within what the live layer takes."""
    rng = random.Random(38)
    by_kind: dict[str, Counter[str]] = {k: Counter() for k in KINDS}
    for n in range(count):
        kind = KINDS[n % len(KINDS)]
        by_kind[kind][trial(b, n, kind, rng)] += 1
        if n % SETTLE_EVERY == SETTLE_EVERY - 1:
            b.restore()
    b.restore()
    return {k: dict(c) for k, c in by_kind.items()}


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


def timed(call: Any, request: SearchRequest) -> float:
    started = time.perf_counter()
    call(request)
    return (time.perf_counter() - started) * 1000


def speed(b: Bench, repeats: int) -> dict[str, float]:
    """Warm p50 with change detection live and with none (interleaved, so load changes hit
    both alike), then with polling (its folds, one per call, would slow the others)."""
    b.settle()
    index, _ = b.engine.indexes.current(b.root)
    ranker = index.memo("ranker", lambda: Ranker(index, b.engine.config))
    calls = {"live": b.engine.search, "none": ranker.search}
    out: dict[str, list[float]] = {name: [] for name in [*calls, *(f"{n}_cpu" for n in calls)]}
    requests = [SearchRequest(mode=SearchMode.HYBRID, query=q, root=str(b.root), top_k=10) for q in QUERIES]
    for req in requests:
        for call in calls.values():
            call(req)
        for _ in range(repeats):
            for name, call in calls.items():
                cpu = time.thread_time()
                out[name].append(timed(call, req))
                out[f"{name}_cpu"].append((time.thread_time() - cpu) * 1000)
    polling = SearchEngine(EngineConfig(cache_dir=b.cache, watch=False))
    out["polling"] = [timed(polling.search, req) for req in requests for _ in range(2)]
    polling.indexes.wait_idle(b.root, 300)
    polling.close()
    return {k: p50(v) for k, v in out.items()}


def idle(b: Bench, seconds: float) -> dict[str, float]:
    b.settle()
    before = rss_mb()
    extra = watch(b.root, b.cache, ignored=b.cache)  # what one more watcher of the tree costs
    added = rss_mb() - before
    extra.close()
    workers = kept_workers()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    worker_cpu0 = sum(sum(w.cpu_times()[:2]) for w in workers)
    time.sleep(seconds)  # the engine's watcher of the tree is live throughout
    cpu = time.process_time() - cpu0 + sum(sum(w.cpu_times()[:2]) for w in workers) - worker_cpu0
    return {
        "core_share": cpu / (time.perf_counter() - wall0),
        "watcher_mb": added,
        "worker_pss_mb": sum(pss_mb(w.pid) for w in workers),
        "seconds": seconds,
    }


def kept_workers() -> list[psutil.Process]:
    """The live layer's kept chunking worker(s): with the tree settled, the only processes the
    forkserver (started for chunking, shared with every build) has forked that still run."""
    me = psutil.Process()
    return [p for p in me.children(recursive=True) if p.ppid() != me.pid]


def pss_mb(pid: int) -> float:
    """A process's proportional set size: its own pages, plus its share of those it shares
    (a forked worker shares most of its imports with the forkserver)."""
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    return 0.0


def one_edit(b: Bench, runs: int) -> dict[str, Any]:
    """Per run, on a settled tree: the query for a new function (it finds nothing yet: the
    same ranking work), then a function of that name appended to a file, then the same query
    again: what the edit added is the second search's time minus the first's, measured side by
    side so that the machine's load weighs on both alike."""
    added, seen = [], 0
    for n in range(runs):
        b.settle()
        name = f"zq_one_edit_{n}"
        target = b.py_files[(n * 7919) % len(b.py_files)]
        started = time.perf_counter()
        b.search(name)
        before = time.perf_counter() - started
        b.write(target, (b.root / target).read_bytes() + f"\n\ndef {name}():\n    return {n}\n".encode())
        started = time.perf_counter()
        result = b.search(name)
        added.append((time.perf_counter() - started - before) * 1000)
        seen += any(m.path == target and name in m.content for m in result.matches)
    b.restore()
    return {"added_p50_ms": p50(added), "added_max_ms": max(added), "seen": seen, "runs": runs}


# A checkout is another process writing files (git): it takes no time from this one's searches.
_WRITER = "import sys\nfor p in sys.stdin.read().split('\\0'):\n    open(p, 'ab').write(b'\\n# checked out\\n')\n"


def checkout(b: Bench, files: int) -> dict[str, Any]:
    b.settle()
    chosen = b.py_files[:: max(1, len(b.py_files) // files)][:files]
    for rel in chosen:
        b.remember(rel)
    writer = subprocess.Popen([sys.executable, "-c", _WRITER], stdin=subprocess.PIPE)
    assert writer.stdin is not None
    writer.stdin.write("\0".join(str(b.root / rel) for rel in chosen).encode())
    writer.stdin.close()
    latencies: list[float] = []
    states: Counter[str] = Counter()
    finished: float | None = None  # when the writer was seen done
    while True:  # searches back to back until one after the writes answers `current`
        if finished is None and writer.poll() is not None:
            finished = time.perf_counter()
        started = time.perf_counter()
        result = b.search(QUERIES[len(latencies) % len(QUERIES)])
        latencies.append(time.perf_counter() - started)
        state = result.freshness.state if result.freshness else "none"
        states[state] += 1
        if finished is not None and state == "current":
            break
    assert finished is not None
    folded = time.perf_counter() - finished
    b.restore()
    return {"searches": len(latencies), "slowest_s": max(latencies), "states": dict(states), "folded_s": folded}


def measure(args: argparse.Namespace, copies: int, largest: bool) -> dict[str, Any]:
    b = Bench(args.work, args.source, copies)
    try:
        row: dict[str, Any] = {"copies": copies, "chunks": len(b.engine.indexes.get(b.root).chunks)}
        row["speed"] = speed(b, args.repeats)
        print(f"{copies}x speed: {row['speed']}", file=sys.stderr)
        row["trials"] = trials(b, args.trials)
        print(f"{copies}x trials: {row['trials']}", file=sys.stderr)
        if largest:
            row["idle"] = idle(b, args.idle_s)
            row["one_edit"] = one_edit(b, runs=args.edits)
            row["checkout"] = checkout(b, args.checkout)
            print(f"{copies}x: {row['idle']} {row['one_edit']} {row['checkout']}", file=sys.stderr)
        return row
    finally:
        b.close()


def report(rows: list[dict[str, Any]], checkout_files: int, load: tuple[float, float, float]) -> Report:
    out = [
        f"Load average when it started: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min, 2 cores).",
        "",
        "| copies | chunks | trials: fresh / marked / stale | hybrid p50 live | no detection | ratio "
        "| CPU p50 live / none | polling |",
        "|---|---|---|---|---|---|---|---|",
    ]
    met = True
    stale_total = trial_total = 0
    for r in rows:
        totals: Counter[str] = Counter()
        for counts in r["trials"].values():
            totals.update(counts)
        stale_total += totals["stale"]
        trial_total += sum(totals.values())
        s = r["speed"]
        ratio = s["live"] / s["none"]
        met &= ratio <= SPEED_RATIO and totals["stale"] == 0
        out.append(
            f"| {r['copies']}x | {r['chunks']:,} | {totals['fresh']} / {totals['marked']} / {totals['stale']} "
            f"| {s['live']:.2f} ms | {s['none']:.2f} ms | **{ratio:.2f}x** "
            f"| {s['live_cpu']:.2f} / {s['none_cpu']:.2f} ms ({s['live_cpu'] / s['none_cpu']:.2f}x) "
            f"| {s['polling']:.1f} ms |"
        )
    out += ["", "| copies | kind | fresh | marked | stale |", "|---|---|---|---|---|"]
    for r in rows:
        for kind, counts in r["trials"].items():
            out.append(
                f"| {r['copies']}x | {kind} | {counts.get('fresh', 0)} | {counts.get('marked', 0)} "
                f"| {counts.get('stale', 0)} |"
            )
    big = rows[-1]
    idle_, edit, co = big["idle"], big["one_edit"], big["checkout"]
    targets = [
        ("no stale answers", f"{stale_total} stale in {trial_total} trials", stale_total == 0),
        (
            f"warm hybrid p50 live <= {SPEED_RATIO}x none",
            ", ".join(f"{r['copies']}x {r['speed']['live'] / r['speed']['none']:.2f}x" for r in rows),
            all(r["speed"]["live"] / r["speed"]["none"] <= SPEED_RATIO for r in rows),
        ),
        (
            f"idle watched {big['copies']}x tree <= 1% of a core, <= {IDLE_MB:.0f} MB",
            f"{100 * idle_['core_share']:.2f}% of a core over {idle_['seconds']:.0f} s, "
            f"+{idle_['watcher_mb']:.1f} MB a watcher, {idle_['worker_pss_mb']:.1f} MB (PSS) the kept chunking worker",
            idle_["core_share"] <= IDLE_CORE_SHARE and idle_["watcher_mb"] + idle_["worker_pss_mb"] <= IDLE_MB,
        ),
        (
            f"one edit at {big['copies']}x: seen by the next search, <= {EDIT_ADDED_MS:.0f} ms added (p50)",
            f"seen {edit['seen']}/{edit['runs']}, added p50 {edit['added_p50_ms']:.0f} ms, "
            f"max {edit['added_max_ms']:.0f} ms",
            edit["seen"] == edit["runs"] and edit["added_p50_ms"] <= EDIT_ADDED_MS,
        ),
        (
            f"{checkout_files}-file checkout at {big['copies']}x: answers <= {CHECKOUT_ANSWER_S:.0f} s, "
            f"folded <= {CHECKOUT_FOLDED_S:.0f} s",
            f"{co['searches']} searches, slowest {co['slowest_s']:.2f} s, states {co['states']}, "
            f"all folded {co['folded_s']:.1f} s after the writes",
            co["slowest_s"] <= CHECKOUT_ANSWER_S and co["folded_s"] <= CHECKOUT_FOLDED_S,
        ),
    ]
    out += ["", "| target | measured | verdict |", "|---|---|---|"]
    for name, measured, ok in targets:
        out.append(f"| {name} | {measured} | {verdict(ok)} |")
        met &= ok
    headline = (
        f"{stale_total} stale answers in {trial_total} edit-then-search trials; warm hybrid p50 with change "
        f"detection {big['speed']['live']:.1f} vs {big['speed']['none']:.1f} ms without at {big['copies']}x; "
        f"one edit at {big['copies']}x adds {edit['added_p50_ms']:.0f} ms"
    )
    return Report("\n".join(out), headline, {"rows": rows}, target_met=met)


def main() -> int:
    args = parser().parse_args()
    if not args.source.is_dir():
        print(f"no corpus at {args.source}: pip download --no-deps sympy, unzip the wheel there", file=sys.stderr)
        return 2
    sizes = [int(s) for s in args.sizes.split(",")]
    started = os.getloadavg()
    rows = [measure(args, n, n == max(sizes)) for n in sizes]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"load average at start: {started}, peak RSS {peak:.0f} MB", file=sys.stderr)
    return emit(report(rows, args.checkout, started), args)


if __name__ == "__main__":
    sys.exit(main())
