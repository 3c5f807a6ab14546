"""What the live-index tests share: an engine over a given embedder, a search, whether a match
is true to the file on disk now, and how many inotify instances this process holds."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from search_engine.config import EngineConfig
from search_engine.engine import SearchEngine
from search_engine.index.manager import IndexManager
from search_engine.models import Match, SearchMode, SearchRequest, SearchResult


def engine_for(cache: Path, embedder: Any, **options: Any) -> SearchEngine:
    """An engine whose index manager uses `embedder` (the session's static one) and `options`."""
    engine = SearchEngine(EngineConfig(cache_dir=cache))
    engine._indexes = IndexManager(engine.config, embedder=embedder, **options)
    return engine


def search(engine: SearchEngine, root: Path, query: str, mode: SearchMode = SearchMode.HYBRID) -> SearchResult:
    """The top 20 of `query` over `root`."""
    return engine.search(SearchRequest(mode=mode, query=query, root=str(root), top_k=20))


def true_to_disk(root: Path, match: Match) -> bool:
    """The match's text is the file's text at its bytes, and its lines are where those bytes are."""
    data = (root / match.path).read_bytes()
    return (
        data[match.byte_start : match.byte_end].decode() == match.content
        and data[: match.byte_start].count(b"\n") + 1 == match.line_start
    )


def hits(result: SearchResult, needle: str) -> list[Match]:
    """The matches whose text holds `needle`."""
    return [m for m in result.matches if needle in m.content]


def inotify_instances() -> int:
    """How many inotify instances this process holds (a user may hold 128 in all)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own fd, closed by now
            count += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify"
    return count
