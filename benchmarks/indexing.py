"""Indexing speed: cold builds of the benchmark corpora side by side with semble, and
incremental updates after touching or editing one file.

- Cold: the four corpora of the shared kit (`/work/shared/bench`, fetched by its
  `fetch-corpora`) indexed one after the other into a fresh index directory, with the model
  already loaded (loading is not indexing; both sides warm it the same way). codepager runs
  its real `IndexManager.update` (discovery, chunking, embedding, lexical index, atomic
  write); semble 0.7.0 runs `SembleIndex.from_path` with a fresh cache, the same static model
  (the one codepager's `static` profile ships), in its own virtualenv. Each system runs
  in its own subprocess; rounds alternate between them so both see the same machine load;
  medians are reported.
- Incremental (codepager): on a copy of the corpora, after a cold build, `update` after
  touching one file (new mtime, same bytes), after appending a line to one file, and with
  nothing changed. Each is run in a process with the model loaded, as a server would.
- Cold process: `codepager index` on all four corpora from a shell, imports and model load
  included, as a person would run it.

usage: python benchmarks/indexing.py [--rounds 3] [--corpora DIR] [--semble-python PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# As a script, sys.path[0] is benchmarks/, whose regex.py would shadow the `regex` package.
sys.path[0] = str(ROOT)

from benchmarks.report import Report, add_report_argument, emit
from search_engine.config import EngineConfig
from search_engine.embedding.embedder import resolve_model

REPOS = ("aiohttp", "fastapi", "model2vec", "pydantic")
DEFAULT_CORPORA = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "codepager-bench"
TOUCHED = "aiohttp/aiohttp/client.py"  # a large file (~1,500 lines): the worst case to re-chunk

CODEPAGER_COLD = textwrap.dedent("""\
    import json, sys, tempfile, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    from search_engine.config import EngineConfig
    from search_engine.index.manager import IndexManager

    corpora = Path(sys.argv[1])
    cache = Path(tempfile.mkdtemp(prefix="codepager-bench-"))
    manager = IndexManager(EngineConfig(cache_dir=cache))
    manager.embedder.embed(["warm up"])
    out = {"repos": {}}
    started = time.perf_counter()
    for repo in sys.argv[3].split(","):
        stats = manager.update(corpora / repo)
        out["repos"][repo] = {"seconds": stats.seconds, "chunks": stats.chunks, "files": stats.files,
                              "phases": stats.phase_seconds}
    out["total_s"] = time.perf_counter() - started
    print(json.dumps(out))
""")

SEMBLE_COLD = textwrap.dedent("""\
    import json, os, sys, tempfile, time
    from pathlib import Path
    os.environ["SEMBLE_CACHE_LOCATION"] = tempfile.mkdtemp(prefix="semble-bench-")
    from semble import SembleIndex

    with tempfile.TemporaryDirectory() as warm:
        (Path(warm) / "warm.py").write_text("def warm_up():\\n    return 1\\n")
        SembleIndex.from_path(warm)
    corpora = Path(sys.argv[1])
    out = {"repos": {}}
    started = time.perf_counter()
    for repo in sys.argv[2].split(","):
        t = time.perf_counter()
        index = SembleIndex.from_path(corpora / repo)
        out["repos"][repo] = {"seconds": time.perf_counter() - t, "chunks": len(index.chunks)}
    out["total_s"] = time.perf_counter() - started
    print(json.dumps(out))
""")

CODEPAGER_INCREMENTAL = textwrap.dedent("""\
    import json, os, sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[3])
    from search_engine.config import EngineConfig
    from search_engine.index.manager import IndexManager

    corpora, cache, touched = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[4]
    manager = IndexManager(EngineConfig(cache_dir=cache))
    manager.embedder.embed(["warm up"])
    root = corpora / touched.split("/")[0]
    manager.update(root)
    path = corpora / touched

    def timed(label):
        t = time.perf_counter()
        stats = manager.update(root)
        return label, {"seconds": time.perf_counter() - t, "embedded": stats.chunks_embedded,
                       "generation": stats.generation, "changed": stats.changed}

    results = [timed("nothing changed")]
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    results.append(timed("touch one file"))
    with path.open("a") as fh:
        fh.write("# edited by the benchmark\\n")
    results.append(timed("edit one file"))
    print(json.dumps(dict(results)))
""")


def run_json(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--corpora", type=Path, default=DEFAULT_CORPORA)
    ap.add_argument("--semble-python", type=Path, default=Path("/work/semble-venv/bin/python"))
    add_report_argument(ap)
    return ap


def main() -> int:
    args = parser().parse_args()
    missing = [r for r in REPOS if not (args.corpora / r).is_dir()]
    if missing:
        print(f"corpora missing under {args.corpora}: {missing}; run /work/shared/bench/fetch-corpora", file=sys.stderr)
        return 2
    return emit(run(args), args)


def run(args: argparse.Namespace) -> Report:
    model_dir = resolve_model(EngineConfig()).source
    repos = ",".join(REPOS)

    ours: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    for r in range(args.rounds):
        ours.append(run_json([sys.executable, "-c", CODEPAGER_COLD, str(args.corpora), str(ROOT), repos]))
        if args.semble_python.exists():
            env = {**os.environ, "SEMBLE_MODEL_NAME": str(model_dir), "HF_HUB_OFFLINE": "1"}
            theirs.append(run_json([str(args.semble_python), "-c", SEMBLE_COLD, str(args.corpora), repos], env))
        print(
            f"round {r + 1}: codepager {ours[-1]['total_s']:.2f} s"
            + (f", semble {theirs[-1]['total_s']:.2f} s" if theirs else ""),
            file=sys.stderr,
        )

    with tempfile.TemporaryDirectory(prefix="codepager-incr-") as tmp:
        copy = Path(tmp) / "corpora"
        for repo in REPOS:
            shutil.copytree(args.corpora / repo, copy / repo)
        cache = Path(tmp) / "cache"
        cache.mkdir()
        incremental = run_json([sys.executable, "-c", CODEPAGER_INCREMENTAL, str(copy), str(cache), str(ROOT), TOUCHED])
        shutil.rmtree(cache / "indexes")
        config = cache / "codepager.toml"
        config.write_text(f'[index]\ncache_dir = "{cache}"\n')
        cli = Path(sys.executable).parent / "codepager"  # the console script this interpreter installed
        started = time.perf_counter()
        for repo in REPOS:
            subprocess.run(
                [str(cli), "index", str(copy / repo), "--config", str(config)], check=True, capture_output=True
            )
        cold_process_s = time.perf_counter() - started

    return report(ours, theirs, incremental, cold_process_s)


def report(
    ours: list[dict[str, Any]], theirs: list[dict[str, Any]], incremental: dict[str, Any], cold_process_s: float
) -> Report:
    out: list[str] = []
    ours_total = statistics.median(o["total_s"] for o in ours)
    chunks = sum(ours[0]["repos"][r]["chunks"] for r in REPOS)
    out.append(f"| system | cold index, 4 repos (median of {len(ours)}) | chunks | chunks/s |")
    out.append("|---|---|---|---|")
    out.append(f"| codepager static | {ours_total:.2f} s | {chunks} | {chunks / ours_total:,.0f} |")
    if theirs:
        theirs_total = statistics.median(t["total_s"] for t in theirs)
        their_chunks = sum(theirs[0]["repos"][r]["chunks"] for r in REPOS)
        out.append(f"| semble 0.7.0 | {theirs_total:.2f} s | {their_chunks} | {their_chunks / theirs_total:,.0f} |")
        ratios = ", ".join(f"{o['total_s'] / t['total_s']:.2f}" for o, t in zip(ours, theirs, strict=True))
        out.append(f"\ncodepager / semble cold index time: {ours_total / theirs_total:.2f}x (per round: {ratios})")
    out.append(
        "\nper repo (codepager, median s): "
        + ", ".join(f"{r} {statistics.median(o['repos'][r]['seconds'] for o in ours):.2f}" for r in REPOS)
    )
    phases: dict[str, list[float]] = {}
    for o in ours:
        totals: dict[str, float] = {}
        for r in REPOS:
            for phase, s in o["repos"][r]["phases"].items():
                totals[phase] = totals.get(phase, 0.0) + s
        for phase, s in totals.items():
            phases.setdefault(phase, []).append(s)
    out.append(
        "phases (codepager, median s over 4 repos): "
        + ", ".join(f"{p} {statistics.median(v):.2f}" for p, v in phases.items())
    )
    out.append("\n| incremental update (aiohttp, model loaded) | time | chunks embedded | generation |")
    out.append("|---|---|---|---|")
    for label, row in incremental.items():
        out.append(f"| {label} | {row['seconds'] * 1000:.0f} ms | {row['embedded']} | {row['generation']} |")
    out.append(f"\ncold process: `codepager index` x 4 repos, imports and model load included: {cold_process_s:.2f} s")
    headline = f"codepager builds its index cold in {ours_total:.2f} s for the 4 benchmark repositories"
    if theirs:
        headline += f", {ours_total / theirs_total:.2f}x semble's time on the same model"
    touched = incremental.get("touch one file", {}).get("seconds")
    if touched is not None:
        headline += f"; an update after touching one file takes {touched * 1000:.0f} ms"
    figures = {
        "codepager_cold_s": ours_total,
        "semble_cold_s": theirs_total if theirs else None,
        "incremental": incremental,
        "cold_process_s": cold_process_s,
    }
    return Report(markdown="\n".join(out), headline=headline, figures=figures)


if __name__ == "__main__":
    sys.exit(main())
