"""Monorepo scale: how build time, memory, disk and query latency grow with the tree.

A generated monorepo is N copies of one real corpus (sympy, ~1,570 files and 31 MB per copy)
side by side (`copy-00/`, `copy-01/`, ...), at 1x, 2x, 4x and 8x. Per size, each step runs in
a fresh process so its peak RSS is its own:

- cold: `IndexManager.update` into an empty cache (the model loaded first, as the `indexing`
  benchmark does): seconds, peak RSS, index size on disk;
- start: a new process runs one hybrid search through `SearchEngine` with the index already
  on disk: time to the first answer (opening the index, checking freshness, ranking) and
  the process's RSS afterwards (the index as a server holds it);
- warm: p50 of regex, semantic and hybrid searches (top 10) in that process;
- update: 100 files edited (one line appended each), then `update`: seconds.

Each step also reports its process's CPU seconds (`cpu_s`; the cold step's excludes its
chunking workers): on a shared machine the wall times follow the load, the CPU times less.

A build chunks its files in worker processes (`search_engine.chunking.jobs`): the cold
step's peak RSS is the indexing process's own, and `workers_rss_mb` the largest sum of its
workers' resident sets seen (sampled every 0.2 s).

semble 0.7.0 (its own virtualenv, the same static model) runs beside it at every size, or at
those given by `--semble-sizes`: cold index time, peak RSS and warm query p50. Run through
`python -m benchmarks`, the curves are drawn for docs/benchmarks.md (`benchmarks.plot`).

usage: python benchmarks/scale.py [--sizes 1,2,4,8] [--semble-sizes 1,2,4,8] [--source DIR]
       [--work DIR] [--semble-python PATH]
The source defaults to the sympy wheel unpacked in ~/.cache/codepager-scale/sympy-src
(`pip download --no-deps sympy` and unzip it there).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# As a script, sys.path[0] is benchmarks/, whose regex.py would shadow the `regex` package.
sys.path[0] = str(ROOT)

from benchmarks.report import Report, add_report_argument, emit
from search_engine.config import EngineConfig
from search_engine.embedding.embedder import resolve_model

DEFAULT_WORK = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "codepager-scale"
DEFAULT_SOURCE = DEFAULT_WORK / "sympy-src"
EDITED_FILES = 100
REPEATS = 7
QUERIES = (
    "solve a system of linear equations",
    "Matrix determinant",
    "how are integrals of rational functions computed",
    "simplify trigonometric expressions",
    "parse a string into an expression",
    "LaTeX printer for fractions",
    "groebner basis",
    "series expansion around a point",
)
REGEXES = (r"def\s+_eval_derivative", r"class \w+Printer", "raise NotImplementedError")

# Shared by the worker snippets: the peak and current resident set of this process, in MB.
_RSS = textwrap.dedent("""\
    import resource
    def peak_mb():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    def rss_mb():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
""")

COLD = _RSS + textwrap.dedent("""\
    import json, sys, threading, time
    from pathlib import Path
    import psutil
    sys.path.insert(0, sys.argv[3])
    from search_engine.config import EngineConfig
    from search_engine.index.manager import IndexManager

    def workers_rss(done, peak):
        me = psutil.Process()
        while not done.wait(0.2):
            total = 0
            for child in me.children(recursive=True):
                try:
                    total += child.memory_info().rss
                except psutil.Error:
                    pass
            peak[0] = max(peak[0], total / 2**20)

    if __name__ == "__main__":  # the build's worker processes import this module again
        root, cache = Path(sys.argv[1]), Path(sys.argv[2])
        manager = IndexManager(EngineConfig(cache_dir=cache))
        manager.embedder.embed(["warm up"])
        before = peak_mb()
        done, peak = threading.Event(), [0.0]
        sampler = threading.Thread(target=workers_rss, args=(done, peak), daemon=True)
        sampler.start()
        started, cpu = time.perf_counter(), time.process_time()
        stats = manager.update(root)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        done.set()
        sampler.join()
        print(json.dumps({"seconds": seconds, "cpu_s": cpu, "peak_rss_mb": peak_mb(), "model_rss_mb": before,
                          "workers_rss_mb": peak[0], "chunks": stats.chunks, "files": stats.files,
                          "phases": stats.phase_seconds, "disk_mb": manager.store(root).size_on_disk() / 2**20}))
""")

START = _RSS + textwrap.dedent("""\
    import json, statistics, sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[3])
    from search_engine.config import EngineConfig
    from search_engine.engine import SearchEngine
    from search_engine.models import SearchMode, SearchRequest

    root, cache, spec = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[4])
    engine = SearchEngine(EngineConfig(cache_dir=cache))
    engine.indexes.embedder.embed(["warm up"])  # model loading is not the index's cost
    def request(mode, query):
        return SearchRequest(mode=mode, query=query, root=str(root), top_k=10)
    started = time.perf_counter()
    engine.search(request(SearchMode.HYBRID, spec["queries"][0]))
    first_s = time.perf_counter() - started
    out = {"first_search_s": first_s, "rss_mb": rss_mb()}
    for mode, queries in ((SearchMode.REGEX, spec["regexes"]), (SearchMode.SEMANTIC, spec["queries"]),
                          (SearchMode.HYBRID, spec["queries"])):
        samples = []
        for q in queries:
            engine.search(request(mode, q))
            for _ in range(spec["repeats"]):
                t = time.perf_counter()
                engine.search(request(mode, q))
                samples.append((time.perf_counter() - t) * 1000)
        out[mode.value + "_p50_ms"] = statistics.median(samples)
    out["rss_after_mb"] = rss_mb()
    print(json.dumps(out))
""")

UPDATE = textwrap.dedent("""\
    import json, sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[3])
    from search_engine.config import EngineConfig
    from search_engine.index.manager import IndexManager

    root, cache, edited = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[4])
    manager = IndexManager(EngineConfig(cache_dir=cache))
    manager.embedder.embed(["warm up"])
    for rel in edited:
        with (root / rel).open("a") as fh:
            fh.write("# edited by the scale benchmark\\n")
    started, cpu = time.perf_counter(), time.process_time()
    stats = manager.update(root)
    print(json.dumps({"seconds": time.perf_counter() - started, "cpu_s": time.process_time() - cpu,
                      "embedded": stats.chunks_embedded, "phases": stats.phase_seconds,
                      "modified": stats.modified, "disk_mb": manager.store(root).size_on_disk() / 2**20}))
""")

SEMBLE = _RSS + textwrap.dedent("""\
    import json, os, statistics, sys, tempfile, time
    from pathlib import Path
    os.environ["SEMBLE_CACHE_LOCATION"] = tempfile.mkdtemp(prefix="semble-scale-")
    from semble import SembleIndex

    with tempfile.TemporaryDirectory() as warm:
        (Path(warm) / "warm.py").write_text("def warm_up():\\n    return 1\\n")
        SembleIndex.from_path(warm)
    root, spec = Path(sys.argv[1]), json.loads(sys.argv[2])
    started = time.perf_counter()
    index = SembleIndex.from_path(root)
    seconds = time.perf_counter() - started
    samples = []
    for q in spec["queries"]:
        index.search(q, top_k=10)
        for _ in range(spec["repeats"]):
            t = time.perf_counter()
            index.search(q, top_k=10)
            samples.append((time.perf_counter() - t) * 1000)
    print(json.dumps({"seconds": seconds, "peak_rss_mb": peak_mb(), "rss_mb": rss_mb(),
                      "chunks": len(index.chunks), "hybrid_p50_ms": statistics.median(samples)}))
""")


def _sizes(value: str) -> list[int]:
    return [int(v) for v in value.split(",") if v.strip()]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=_sizes, default=[1, 2, 4, 8], help="copies of the corpus, e.g. 1,2,4,8")
    ap.add_argument("--semble-sizes", type=_sizes, default=None, help="sizes semble also runs (default: every size)")
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="the corpus copied N times")
    ap.add_argument("--work", type=Path, default=DEFAULT_WORK, help="where the monorepos are generated")
    ap.add_argument("--semble-python", type=Path, default=Path("/work/semble-venv/bin/python"))
    ap.add_argument("--repeats", type=int, default=REPEATS, help="timed runs per query")
    add_report_argument(ap)
    return ap


def main() -> int:
    args = parser().parse_args()
    if not args.source.is_dir():
        print(f"no corpus at {args.source}: pip download --no-deps sympy, unzip the wheel there", file=sys.stderr)
        return 2
    return emit(run(args), args)


def monorepo(source: Path, work: Path, copies: int) -> Path:
    """`copies` copies of `source` under one root, made once and reused (a marker file says
    it is complete)."""
    root = work / f"mono-{copies}x"
    marker = work / f".mono-{copies}x.done"
    if marker.exists() and root.is_dir():
        return root
    shutil.rmtree(root, ignore_errors=True)
    for i in range(copies):
        shutil.copytree(source, root / f"copy-{i:02d}")
    marker.write_text("ok\n")
    return root


def _json(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed: {proc.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _edited(root: Path) -> list[str]:
    files = sorted(p.relative_to(root).as_posix() for p in (root / "copy-00").rglob("*.py"))
    step = max(1, len(files) // EDITED_FILES)
    return files[::step][:EDITED_FILES]


def measure(args: argparse.Namespace, copies: int, model_dir: Path) -> dict[str, Any]:
    root = monorepo(args.source, args.work, copies)
    spec = json.dumps({"queries": QUERIES, "regexes": REGEXES, "repeats": args.repeats})
    row: dict[str, Any] = {"copies": copies}
    with tempfile.TemporaryDirectory(prefix="codepager-scale-") as tmp:
        cache = Path(tmp)
        py, here = sys.executable, str(ROOT)
        row["cold"] = _json([py, "-c", COLD, str(root), str(cache), here])
        print(f"{copies}x cold: {row['cold']}", file=sys.stderr)
        row["start"] = _json([py, "-c", START, str(root), str(cache), here, spec])
        print(f"{copies}x start: {row['start']}", file=sys.stderr)
        edit_root = args.work / f"edit-{copies}x"
        shutil.rmtree(edit_root, ignore_errors=True)
        shutil.copytree(root, edit_root, copy_function=os.link)  # hard links: edits are copied on write below
        edited = _edited(edit_root)
        for rel in edited:  # break the hard link before appending, so the shared tree stays intact
            data = (edit_root / rel).read_bytes()
            (edit_root / rel).unlink()
            (edit_root / rel).write_bytes(data)
        edit_cache = Path(tmp) / "edit"
        edit_cache.mkdir()
        _json([py, "-c", COLD, str(edit_root), str(edit_cache), here])
        row["update"] = _json([py, "-c", UPDATE, str(edit_root), str(edit_cache), here, json.dumps(edited)])
        shutil.rmtree(edit_root, ignore_errors=True)
        print(f"{copies}x update: {row['update']}", file=sys.stderr)
    if copies in (args.sizes if args.semble_sizes is None else args.semble_sizes) and args.semble_python.exists():
        env = {**os.environ, "SEMBLE_MODEL_NAME": str(model_dir), "HF_HUB_OFFLINE": "1"}
        row["semble"] = _json([str(args.semble_python), "-c", SEMBLE, str(root), spec], env)
        print(f"{copies}x semble: {row['semble']}", file=sys.stderr)
    return row


def run(args: argparse.Namespace) -> Report:
    model_dir = Path(resolve_model(EngineConfig()).source)  # the shipped static model, for semble too
    rows = [measure(args, copies, model_dir) for copies in args.sizes]
    return report(rows)


def report(rows: list[dict[str, Any]]) -> Report:
    out = [
        "| copies | chunks | cold index | peak RSS (+ workers) | index on disk | first search after start | serve RSS "
        "| regex p50 | semantic p50 | hybrid p50 | update, 100 files edited |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        c, s, u = r["cold"], r["start"], r["update"]
        out.append(
            f"| {r['copies']}x | {c['chunks']:,} | {c['seconds']:.1f} s "
            f"| {c['peak_rss_mb']:.0f} MB (+ {c.get('workers_rss_mb', 0):.0f} MB) "
            f"| {c['disk_mb']:.0f} MB | {s['first_search_s']:.2f} s | {s['rss_after_mb']:.0f} MB "
            f"| {s['regex_p50_ms']:.1f} ms | {s['semantic_p50_ms']:.1f} ms | {s['hybrid_p50_ms']:.1f} ms "
            f"| {u['seconds']:.2f} s |"
        )
    semble = [r for r in rows if "semble" in r]
    if semble:
        out += ["", "| copies | system | cold index | peak RSS | hybrid p50 |", "|---|---|---|---|---|"]
        for r in semble:
            c, s, t = r["cold"], r["start"], r["semble"]
            out.append(
                f"| {r['copies']}x | codepager | {c['seconds']:.1f} s | {c['peak_rss_mb']:.0f} MB "
                f"| {s['hybrid_p50_ms']:.1f} ms |"
            )
            out.append(
                f"| {r['copies']}x | semble 0.7.0 | {t['seconds']:.1f} s | {t['peak_rss_mb']:.0f} MB "
                f"| {t['hybrid_p50_ms']:.1f} ms |"
            )
    big = rows[-1]
    headline = (
        f"at {big['copies']}x ({big['cold']['chunks']:,} chunks): cold index {big['cold']['seconds']:.0f} s, "
        f"peak {big['cold']['peak_rss_mb']:.0f} MB, first search {big['start']['first_search_s']:.1f} s, "
        f"hybrid p50 {big['start']['hybrid_p50_ms']:.0f} ms"
    )
    return Report(markdown="\n".join(out), headline=headline, figures={"rows": rows})


if __name__ == "__main__":
    sys.exit(main())
