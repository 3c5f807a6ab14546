"""The one entry point the layers above call: `SearchEngine.search(request) -> SearchResult`.

It dispatches on the request's mode. Regex searches are stateless (ripgrep each time); semantic
and hybrid searches go through the persistent index of the request's root. The engine owns the
per-root index handles so a server process keeps one warm index per root.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from search_engine.config import EngineConfig
from search_engine.errors import IndexDamagedError
from search_engine.models import Freshness, Match, SearchMode, SearchRequest, SearchResult
from search_engine.tokenize import validate_query

if TYPE_CHECKING:
    from search_engine.index import IndexManager

log = logging.getLogger("codepager.engine")


class SearchEngine:
    def __init__(self, config: EngineConfig | None = None) -> None:
        self.config = config or EngineConfig()
        self._indexes: IndexManager | None = None

    @property
    def indexes(self) -> IndexManager:
        """The per-root index cache, created on first use so regex-only processes never load
        the embedding stack."""
        if self._indexes is None:
            from search_engine.index import IndexManager

            self._indexes = IndexManager(self.config, watch=self.config.watch, fresh_wait_s=self.config.fresh_wait_s)
        return self._indexes

    def close(self) -> None:
        """Stop watching the roots' files (an engine used again starts over)."""
        if self._indexes is not None:
            self._indexes.close()

    def generation(self, request: SearchRequest) -> int | None:
        """The index generation a search of `request` would see now (0 for regex: no index),
        or None while files changed before this call are not in the index yet.

        Sessions use it to dedup identical searches and to refuse continuing a cursor whose
        results may have shifted."""
        if request.mode is SearchMode.REGEX:
            return 0
        index, settled = self.indexes.current(Path(request.root))
        # An answer with live files is of no generation: the next edit changes it.
        return index.generation if settled.state == "current" and not settled.live else None

    def recheck(self, request: SearchRequest, matches: list[Match]) -> list[Match]:
        """`matches` looked up in the files as they are now (`search_engine.recheck`)."""
        from search_engine.recheck import recheck

        return recheck(request.root, matches, self.config.max_file_size)

    def search(self, request: SearchRequest) -> SearchResult:
        """Run `request` to completion. Deterministic for a given index generation."""
        if request.mode is SearchMode.REGEX:
            from search_engine.regex import regex_search

            began = time.time()
            result = regex_search(request, self.config)
            result.freshness = Freshness("current", began, began, "direct")
            return result
        validate_query(request.query)  # a bad query must not cost an index build first
        root = Path(request.root)
        started = time.perf_counter()
        try:
            return self._ranked(root, request, started)
        except IndexDamagedError as exc:
            # Damage in a part read lazily (symbol definitions, a file's text) shows only now:
            # rebuild, then answer from the new generation (damage again is raised as it is).
            log.warning("%s", exc)
            self.indexes.repair(root, exc)
            return self._ranked(root, request, started)

    def _ranked(self, root: Path, request: SearchRequest, started: float) -> SearchResult:
        """A semantic or hybrid search; its `index_time_ms` counts from `started` to the index
        being ready (a rebuild of a damaged one included)."""
        from search_engine.ranking import Ranker

        index, settled = self.indexes.current(root)
        ranker = index.memo("ranker", lambda: Ranker(index, self.config))
        if settled.live:  # changed files not folded in yet, taken as they are now
            ranker = self.indexes.layer(root).ranker(ranker, settled.live)
        index_ms = (time.perf_counter() - started) * 1000
        result = ranker.search(request, settled)
        result.index_time_ms = index_ms
        warnings, notices = self.indexes.said(root)
        result.warnings, result.notices = [*warnings, *result.warnings], [*notices, *result.notices]
        return result
