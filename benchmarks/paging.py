"""Paging benchmark: what the session cache buys on a 10,000-result regex search.

Measured side by side on one generated tree, with the real ripgrep-backed SearchEngine:
- first page: runs the search, digests and stores the list (fresh store each run);
- page N>1 from the cache: verify cursor, slice, mint the next cursor;
- restored page: the session is gone, so the search is re-run and proven identical;
- cursor seal+open: `CursorCodec.encode` + `decode` of a full search cursor (deflate, AES-GCM
  seal; authenticate, bounded inflate, checks).
Targets: cached page >= 50x faster than the first page; seal+open well under 1 ms.

Run: .venv/bin/python benchmarks/paging.py [--results 10000] [--repeats 300]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.report import Report, command, counts_parser, verdict
from search_engine.config import EngineConfig
from search_engine.engine import SearchEngine
from search_engine.models import SearchRequest
from sessions import CursorCodec, MemoryStore, Page, Pager

PAGE_SIZE = 50


def make_tree(root: Path, results: int, files: int) -> None:
    """`results` matching lines spread over `files` files, interleaved with non-matching code."""
    per_file, extra = divmod(results, files)
    for i in range(files):
        n = per_file + (1 if i < extra else 0)
        lines = []
        for j in range(n):
            lines.append(f"def handler_{i}_{j}(request):  # route /api/v{i}/{j}")
            lines.append(f"    return respond(request, status={200 + j % 5})")
        path = root / f"pkg{i % 10}" / f"module_{i:03d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - t0)
    return statistics.median(samples) / 1e6


def parser() -> argparse.ArgumentParser:
    return counts_parser(__doc__, results=10_000, files=200, first_runs=9, repeats=300)


def run(args: argparse.Namespace) -> Report:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        make_tree(root, args.results, args.files)
        engine = SearchEngine(EngineConfig(cache_dir=Path(tmp) / "cache"))
        request = SearchRequest(query=r"def handler_\d+_\d+", root=str(root.resolve()), max_results=args.results)
        codec = CursorCodec("benchmark-secret-key-0123456789abcdef")

        def fresh_pager() -> Pager:
            return Pager(engine, MemoryStore(sweep_interval_s=None), codec)

        def next_page(pager: Pager, cursor: str) -> Page:
            return pager.resume(cursor)  # as the server serves a cursor

        engine.search(request)  # warm the page cache and rg binary lookup
        first_ms = median_ms(lambda: fresh_pager().first_page(request, PAGE_SIZE), args.first_runs)

        pager = fresh_pager()
        page = pager.first_page(request, PAGE_SIZE)
        assert page.total_count == args.results, f"expected {args.results} results, got {page.total_count}"
        cursors = []
        while page.next_cursor is not None:
            cursors.append(page.next_cursor)
            page = next_page(pager, page.next_cursor)
        picks = iter(cursors[i % len(cursors)] for i in range(args.repeats))
        cached_ms = median_ms(lambda: next_page(pager, next(picks)), args.repeats)
        restored_ms = median_ms(lambda: next_page(fresh_pager(), cursors[len(cursors) // 2]), args.first_runs)

        state = codec.decode(cursors[len(cursors) // 2])
        seal_open_ms = median_ms(lambda: codec.decode(codec.encode(state)), args.repeats * 10)

    rows = [
        ("first page (runs the search)", first_ms),
        ("page N>1 from the session cache", cached_ms),
        ("page N>1 restored (session gone, search re-run)", restored_ms),
        (f"cursor seal + open ({len(cursors[0])}-char cursor)", seal_open_ms),
    ]
    ratio = first_ms / cached_ms
    met = ratio >= 50 and seal_open_ms < 1
    lines = [
        f"{args.results} results in {args.files} files, page size {PAGE_SIZE}\n",
        "| operation | median |",
        "|---|---|",
        *(f"| {name} | {ms:.3f} ms |" for name, ms in rows),
        "",
        f"- cached page vs first page: **{ratio:.0f}x** faster (target >= 50x)",
        f"- cursor seal+open: **{seal_open_ms * 1000:.0f} µs** (target well under 1 ms)",
    ]
    return Report(
        markdown="\n".join(lines),
        headline=(
            f"a cached page is {ratio:.0f}x faster than page 1 ({cached_ms:.3f} vs {first_ms:.1f} ms; "
            f"target >= 50x: {verdict(met)})"
        ),
        figures={
            "first_ms": first_ms,
            "cached_ms": cached_ms,
            "restored_ms": restored_ms,
            "seal_open_ms": seal_open_ms,
            "cached_speedup": ratio,
        },
        target_met=met,
    )


main = command(parser, run)


if __name__ == "__main__":
    raise SystemExit(main())
