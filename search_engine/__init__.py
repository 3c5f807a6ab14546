"""Finding things in a codebase: discovery, regex (ripgrep), chunking, embeddings, the
persistent index, semantic and hybrid ranking. Knows nothing of MCP or sessions.

This module is the engine's public API: the layers above (`sessions`, `server`) import only the
names in `__all__`, from here, never a submodule, so the engine's inside can be rearranged
without touching them. The index (`IndexManager`, `IndexStatus`) is imported on first use:
it brings in the numeric stack, which a plain regex search never needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra import lazy_exports
from search_engine.config import (
    DEFAULT_EMBEDDING_PROFILE,
    DEFAULT_FRESH_WAIT_S,
    DEFAULT_MAX_FILE_SIZE,
    DEFAULT_MAX_LINE_WIDTH,
    DEFAULT_RG_MAX_CONCURRENT,
    DEFAULT_TIMEOUT_S,
    MAX_FILE_SIZE_LIMIT,
    EngineConfig,
    default_cache_dir,
)
from search_engine.engine import SearchEngine
from search_engine.errors import (
    IndexDamagedError,
    IndexNotReadyError,
    IndexStoreError,
    InvalidQueryError,
    ModelLoadError,
    PathError,
    PathNotFoundError,
    PathOutsideRootError,
    SearchError,
    SearchTimeoutError,
    ToolMissingError,
)
from search_engine.files.discovery import display_path
from search_engine.files.languages import language_for
from search_engine.files.paths import SearchLocation, resolve_search_path, searched_roots
from search_engine.models import (
    DEFAULT_MAX_RESULTS,
    DEFAULT_TOP_K,
    MAX_CONTEXT_LINES,
    Count,
    Freshness,
    Match,
    MatchType,
    SearchMode,
    SearchRequest,
    SearchResult,
)

if TYPE_CHECKING:
    from search_engine.index.manager import IndexManager, IndexStatus

__all__ = [
    "DEFAULT_EMBEDDING_PROFILE",
    "DEFAULT_FRESH_WAIT_S",
    "DEFAULT_MAX_FILE_SIZE",
    "DEFAULT_MAX_LINE_WIDTH",
    "DEFAULT_MAX_RESULTS",
    "DEFAULT_RG_MAX_CONCURRENT",
    "DEFAULT_TIMEOUT_S",
    "DEFAULT_TOP_K",
    "MAX_CONTEXT_LINES",
    "MAX_FILE_SIZE_LIMIT",
    "Count",
    "EngineConfig",
    "Freshness",
    "IndexDamagedError",
    "IndexManager",
    "IndexNotReadyError",
    "IndexStatus",
    "IndexStoreError",
    "InvalidQueryError",
    "Match",
    "MatchType",
    "ModelLoadError",
    "PathError",
    "PathNotFoundError",
    "PathOutsideRootError",
    "SearchEngine",
    "SearchError",
    "SearchLocation",
    "SearchMode",
    "SearchRequest",
    "SearchResult",
    "SearchTimeoutError",
    "ToolMissingError",
    "default_cache_dir",
    "display_path",
    "language_for",
    "resolve_search_path",
    "searched_roots",
]


# The names imported on first use (see the module doc).
__getattr__ = lazy_exports(__name__, dict.fromkeys(("IndexManager", "IndexStatus"), "search_engine.index.manager"))
