"""The one entry point the layers above call: `SearchEngine.search(request) -> SearchResult`.

It dispatches on the request's mode. Regex searches are stateless (ripgrep each time); semantic
and hybrid searches go through the persistent index of the request's root. The engine owns the
per-root index handles so a server process keeps one warm index per root, and it is also the
front door for building and reporting on them (`prepare_index`, `update_index`, `index_status`):
callers never hold the index cache itself, so how it keeps indexes can change behind these calls.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from search_engine.config import EngineConfig
from search_engine.errors import IndexDamagedError
from search_engine.models import Freshness, Match, SearchMode, SearchRequest, SearchResult
from search_engine.ranking.code_tokens import validate_query
from search_engine.roots import combined_generation, recheck_across, regex_across

if TYPE_CHECKING:
    from search_engine.index.manager import IndexManager, IndexStatus
    from search_engine.index.update import Progress, UpdateStats

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
            from search_engine.index.manager import IndexManager

            self._indexes = IndexManager(self.config, watch=self.config.watch, fresh_wait_s=self.config.fresh_wait_s)
        return self._indexes

    def check_index_cache(self) -> None:
        """Make the index cache now: a cache dir others could write in (`UnsafeCacheDirError`)
        or a model path that does not exist (`ModelLoadError`) then refuses a server's start,
        not its first semantic call. Loads no model."""
        _ = self.indexes

    def prepare_index(self, root: Path) -> bool:
        """Load the index of `root` already on disk, without checking it against the tree, so
        searches can use it at once while `update_index` checks it (or rebuilds it): False if
        there is none this process can use (none yet, another model or format)."""
        return self.indexes.open(root)

    def update_index(self, root: Path, *, full: bool = False, progress: Progress | None = None) -> UpdateStats:
        """Bring the index of `root` up to date with its files now (`full`: rebuild it), and keep
        the result loaded so the next search is warm. `progress(phase, done, total)` hears of
        each phase: "model" first (loading the model takes seconds, and the first query needs it
        even when the index is already up to date), then "scan", "chunk", "embed" and "write"."""
        report = progress or _unheard
        report("model", 0, 1)
        self.indexes.embedder.load()
        report("scan", 0, 0)
        stats = self.indexes.update(root, full=full, progress=progress)
        self.indexes.get(root)
        return stats

    def index_status(self, root: Path) -> IndexStatus:
        """What the index of `root` holds and how its changes are found, read from disk and
        this process's watcher: loads no model and builds nothing."""
        return self.indexes.status(root)

    def close(self) -> None:
        """Stop watching the roots' files (an engine used again starts over)."""
        if self._indexes is not None:
            self._indexes.close()

    def generation(self, request: SearchRequest) -> int | None:
        """The index generation a search of `request` would see now (0 for regex: no index;
        for several roots, their generations combined), or None while files changed before
        this call are not in the index yet.

        Sessions use it to dedup identical searches and to refuse continuing a cursor whose
        results may have shifted."""
        if request.mode is SearchMode.REGEX:
            return 0
        generations = []
        for root in request.searched_roots:
            index, settled = self.indexes.current(Path(root))
            # An answer with live files is of no generation: the next edit changes it.
            if settled.state != "current" or settled.live:
                return None
            generations.append(index.generation)
        return combined_generation(generations)

    def recheck(self, request: SearchRequest, matches: list[Match]) -> list[Match]:
        """`matches` looked up in the files as they are now (`search_engine.live.recheck`), each in
        its own root."""
        from search_engine.live.recheck import recheck

        def in_one(root: str, found: list[Match]) -> list[Match]:
            return recheck(root, found, self.config.max_file_size)

        return recheck_across(request, matches, in_one) if request.roots else in_one(request.root, matches)

    def search(self, request: SearchRequest) -> SearchResult:
        """Run `request` to completion. Deterministic for a given index generation."""
        if request.mode is SearchMode.REGEX:
            from search_engine.regex.search import regex_search

            began = time.time()
            if request.roots:
                result = regex_across(request, lambda one: regex_search(one, self.config))
            else:
                result = regex_search(request, self.config)
            result.freshness = Freshness("current", began, began, "direct")
            return result
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
        from search_engine.ranking.search import Ranker, ranked_result

        ready = []
        for name in request.searched_roots:
            root = Path(name)
            index, settled = self.indexes.current(root)
            ranker = index.memo("ranker", partial(Ranker, index, self.config))
            if settled.live:  # changed files not folded in yet, taken as they are now
                ranker = self.indexes.layer(root).ranker(ranker, settled.live)
            ready.append((name, ranker, settled, index.root))
        ranking = time.perf_counter()
        label = len(ready) > 1
        lists = [
            ranker.rank(request.in_root(name), settled, name if label else None) for name, ranker, settled, _ in ready
        ]
        result = ranked_result(request, lists, ranking)
        result.index_time_ms = (ranking - started) * 1000
        for *_, root in ready:  # what discovery said of each root (ignore rules, files left out)
            warnings, notices = self.indexes.said(root)
            result.warnings, result.notices = [*warnings, *result.warnings], [*notices, *result.notices]
        return result

    def _damaged_root(self, request: SearchRequest, damage: IndexDamagedError) -> Path:
        """The searched root whose index `damage` is in."""
        roots = [Path(root) for root in request.searched_roots]
        for root in roots:
            directory = self.indexes.store(root).directory
            if directory in (damage.where, *damage.where.parents):
                return root
        return roots[0]


def _unheard(phase: str, done: int, total: int) -> None:
    """The progress of an update nobody follows."""
