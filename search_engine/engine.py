"""The one entry point the layers above call: `SearchEngine.search(request) -> SearchResult`.

It dispatches on the request's mode. Regex searches are stateless (ripgrep each time); semantic
and hybrid searches go through the persistent index of the request's root. The engine owns the
per-root index handles so a server process keeps one warm index per root.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from search_engine.config import EngineConfig
from search_engine.errors import IndexDamagedError
from search_engine.models import SearchMode, SearchRequest, SearchResult
from search_engine.roots import combined_generation, regex_across
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

            self._indexes = IndexManager(self.config)
        return self._indexes

    def generation(self, request: SearchRequest) -> int:
        """The index generation a search of `request` would see now (0 for regex: no index;
        for several roots, their generations combined).

        Sessions use it to dedup identical searches and to refuse continuing a cursor whose
        results may have shifted."""
        if request.mode is SearchMode.REGEX:
            return 0
        return combined_generation([self.indexes.generation(Path(root)) for root in request.searched_roots])

    def search(self, request: SearchRequest) -> SearchResult:
        """Run `request` to completion. Deterministic for a given index generation."""
        if request.mode is SearchMode.REGEX:
            from search_engine.regex import regex_search

            if request.roots:
                return regex_across(request, lambda one: regex_search(one, self.config))
            return regex_search(request, self.config)
        validate_query(request.query)  # a bad query must not cost an index build first
        started = time.perf_counter()
        try:
            return self._ranked(request, started)
        except IndexDamagedError as exc:
            # Damage in a part read lazily (symbol definitions, a file's text) shows only now:
            # rebuild, then answer from the new generation (damage again is raised as it is).
            log.warning("%s", exc)
            self.indexes.repair(self._damaged_root(request, exc), exc)
            return self._ranked(request, started)

    def _ranked(self, request: SearchRequest, started: float) -> SearchResult:
        """A semantic or hybrid search, in each of its roots; its `index_time_ms` counts from
        `started` to every index being ready (a rebuild of a damaged one included)."""
        from search_engine.ranking import Ranker, ranked_result

        rankers = []
        for root in request.searched_roots:
            index = self.indexes.get(Path(root))
            rankers.append((root, index.memo("ranker", partial(Ranker, index, self.config))))
        ranking = time.perf_counter()
        several = len(rankers) > 1
        lists = [(root if several else None, ranker, ranker.rank(request.in_root(root))) for root, ranker in rankers]
        result = ranked_result(request, lists, ranking)
        result.index_time_ms = (ranking - started) * 1000
        return result

    def _damaged_root(self, request: SearchRequest, damage: IndexDamagedError) -> Path:
        """The root of the searched index `damage` is in."""
        roots = [Path(root) for root in request.searched_roots]
        for root in roots:
            directory = self.indexes.store(root).directory
            if directory in (damage.where, *damage.where.parents):
                return root
        return roots[0]
