"""`codepager index`: build or update the semantic index of a directory, or report on it.

The index lives in the cache dir (never in the indexed tree), so running this in a checkout
leaves the checkout untouched. Progress goes to stderr (drawn only on a terminal); the
summary or status goes to stdout, as text or `--json`. Exit status: 0 done, 2 error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, get_args

from search_engine import SearchError
from server.settings import IndexSettings, ShippedModel, default_of

if TYPE_CHECKING:
    from search_engine import IndexStatus


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "index",
        help="build or update the semantic index of a directory",
        description="Build or incrementally update the semantic/hybrid search index of PATH.",
    )
    p.add_argument("path", nargs="?", default=".", help="directory to index (default: .)")
    p.add_argument("--full", action="store_true", help="rebuild from scratch instead of updating")
    p.add_argument("--status", action="store_true", help="report on the index without changing it")
    p.add_argument("--json", action="store_true", help="print the summary or status as JSON")
    p.add_argument(
        "--model",
        help=(
            f"embedding model: {' or '.join(get_args(ShippedModel))} (shipped; default "
            f"{default_of(IndexSettings, 'model')}), or a sentence-transformers model name or local path"
        ),
    )
    p.add_argument("--profile", dest="old_profile", help=argparse.SUPPRESS)  # refused with its new name
    p.add_argument("--config", type=Path, help="TOML settings file")
    p.add_argument("--no-progress", action="store_true", help="never draw the progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # imported here: every other subcommand would otherwise pay for the index stack at start-up
    from search_engine import SearchEngine
    from server.settings import load_settings

    if args.old_profile is not None:
        print(f"codepager: --profile is now --model (--model {args.old_profile})", file=sys.stderr)
        return 2
    try:
        settings = load_settings(args.config, {"index": {"model": args.model}})
    except (FileNotFoundError, ValueError) as exc:
        print(f"codepager: {exc}", file=sys.stderr)
        return 2
    root = Path(args.path).expanduser()
    if not root.is_dir():
        print(f"codepager: not a directory: {args.path}", file=sys.stderr)
        return 2
    engine = SearchEngine(settings.engine_config())
    try:
        if args.status:
            _print_status(engine.index_status(root), args.json)
            return 0
        bar = None if args.no_progress or not sys.stderr.isatty() else ProgressBar(sys.stderr)
        stats = engine.update_index(root, full=args.full, progress=bar)
        if bar is not None:
            bar.finish()
        warnings = engine.index_status(root).warnings  # the files the index holds as plain text, and why
    except SearchError as exc:
        print(f"codepager: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the cache dir cannot be created or written
        print(f"codepager: cannot write the index under index.cache_dir: {exc}", file=sys.stderr)
        return 2
    finally:
        engine.close()  # stops watching the root
    for warning in warnings:
        print(f"codepager: warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps(asdict(stats), indent=2))
    else:
        verb = "rebuilt" if stats.rebuilt else ("updated" if stats.changed else "up to date")
        print(
            f"{verb}: {stats.files} files, {stats.chunks} chunks "
            f"({stats.chunks_embedded} embedded), generation {stats.generation}, {stats.seconds:.2f} s"
        )
    return 0


class ProgressBar:
    """One redrawn stderr line: phase, a bar, done/total. Redraws at most every 50 ms."""

    WIDTH = 30

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._last = 0.0

    def __call__(self, phase: str, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self._last < 0.05:
            return
        self._last = now
        filled = self.WIDTH * done // total if total else self.WIDTH
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self.stream.write(f"\r{phase:<6} [{bar}] {done}/{total}\x1b[K")
        self.stream.flush()

    def finish(self) -> None:
        self.stream.write("\r\x1b[K")
        self.stream.flush()


def _print_status(status: IndexStatus, as_json: bool) -> None:
    if as_json:
        print(json.dumps(asdict(status), indent=2))
        return
    rows = [("root", status.root), ("index", status.directory)]
    if not status.exists:
        rows.append(("state", "not built yet (run: codepager index)"))
    else:
        rows += [
            ("files", str(status.files)),
            ("chunks", str(status.chunks)),
            ("model", status.model_id or "-"),
            ("generation", str(status.generation)),
            ("size", _human_size(status.size_bytes)),
            ("updated", _when(status.updated_at)),
        ]
        if status.stale_reason:
            rows.append(("stale", f"{status.stale_reason}; the next update rebuilds it"))
        rows += [("warning", warning) for warning in status.warnings]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


def _human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    ago = max(0.0, time.time() - ts)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))
    if ago < 120:
        return f"{stamp} ({ago:.0f} s ago)"
    if ago < 7200:
        return f"{stamp} ({ago / 60:.0f} min ago)"
    return f"{stamp} ({ago / 3600:.1f} h ago)"
