"""Engine-wide knobs that are not part of a search's identity.

These shape *how* a search runs (time limit, line width, which files are eligible) but two runs
with different values of them are still "the same search" for cursors, so they live here and
not in `SearchRequest`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import platformdirs

from search_engine.ranking.rules import ALL_ON, RankingRules

MINIFIED_GLOBS: tuple[str, ...] = ("*.min.js", "*.min.css")
"""Minified files, left out by default: one line of a whole bundle matches nearly anything.
Answers say how many a search left out (`search_engine.files.skipped`)."""
DEFAULT_EXCLUDES: tuple[str, ...] = (
    ".git",
    "node_modules",
    ".venv",
    "venv",
    "dist",
    "build",
    "target",
    "__pycache__",
    "*.lock",
    "package-lock.json",
    *MINIFIED_GLOBS,
    "*.map",
)


DEFAULT_TIMEOUT_S = 30.0
"""A regex search is killed after this long."""
DEFAULT_MAX_LINE_WIDTH = 500
"""Long lines are cut to this many characters around the match: a minified bundle's one line
would otherwise be a whole page. Not a setting of the server (nobody tuned it, and what a page
may hold is bounded by the client's token budget anyway); read when an `EngineConfig` is made."""
DEFAULT_MAX_FILE_SIZE = 1024 * 1024
"""Files larger than this (bytes) are skipped."""
DEFAULT_RG_MAX_CONCURRENT = 4
"""At most this many rg processes run at once in one process (`search_engine.regex.ripgrep`).
Not a setting of the server: each rg is held to 192 MiB plus 4x `max_file_size`, so 4 bounds
them to under 1 GiB at the default, and rg is I/O-bound with threads of its own, so more at once
would not finish sooner on the 2-8 cores the server shares with its clients."""
MAX_FILE_SIZE_LIMIT = 256 << 20
"""The largest `max_file_size` there may be: what an index stores of one file is bounded by
it when read back (`index.chunk_table.MAX_FILE_TEXT`), whoever wrote the index."""
DEFAULT_FRESH_WAIT_S = 0.5
"""How long a semantic or hybrid call waits for the files changed before it to be folded into the
index before answering without them, marked `updating` (`search_engine.live.read_your_writes`). Only a change the
live layer does not take (more than `live.layer.MAX_LIVE_FILES` files, a directory moved in, an
ignore file, changes found by polling) waits: a checkout's searches answer within about this."""
DEFAULT_EMBEDDING_PROFILE: Final = "static"
"""The embedding profile (see docs/benchmarks.md for the measurement behind it)."""


INDEXES_DIR = "indexes"
"""The cache dir's directory of indexes, one per root (`search_engine.index.store.index_dir`)."""


def default_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/codepager` (or the platform equivalent): never inside a searched repo."""
    return Path(platformdirs.user_cache_dir("codepager", appauthor=False))


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """The engine's knobs. Its defaults are the constants above, which the server's settings
    (`server.settings`) read as their own defaults, so each is written once."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    max_line_width: int = field(default_factory=lambda: DEFAULT_MAX_LINE_WIDTH)
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    rg_max_concurrent: int = DEFAULT_RG_MAX_CONCURRENT
    default_excludes: tuple[str, ...] = DEFAULT_EXCLUDES
    cache_dir: Path = field(default_factory=default_cache_dir)
    embedding_profile: str = DEFAULT_EMBEDDING_PROFILE
    embedding_model: str | None = None
    cache_entries: tuple[str, ...] = ()
    """What the caller keeps in `cache_dir` beside the indexes: names, and globs for their
    temporary files (the sessions' cursor key). Left out of every walk of a root that is the
    cache dir itself, as the indexes are: the engine does not know its callers' files."""
    watch: bool = True
    """Find changes to a root by file events (False: by listing the tree on every search)."""
    fresh_wait_s: float = DEFAULT_FRESH_WAIT_S
    ranking: RankingRules = ALL_ON
    """Which ranking rules are on (all, in production; `benchmarks/ablation.py` switches them
    off one at a time to measure each)."""
