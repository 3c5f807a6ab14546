"""The one entry point the layers above call: `SearchEngine.search(request) -> SearchResult`.

It dispatches on the request's mode. Regex searches are stateless (ripgrep each time); semantic
and hybrid searches go through the persistent index of the request's root. The engine owns the
per-root index handles so a server process keeps one warm index per root.
"""

from __future__ import annotations

from search_engine.config import EngineConfig
from search_engine.models import SearchMode, SearchRequest, SearchResult


class SearchEngine:
    def __init__(self, config: EngineConfig | None = None) -> None:
        self.config = config or EngineConfig()

    def generation(self, request: SearchRequest) -> int:
        """The index generation a search of `request` would see now (0 for regex: no index).

        Sessions use it to dedup identical searches and to refuse continuing a cursor whose
        results may have shifted."""
        if request.mode is SearchMode.REGEX:
            return 0
        raise NotImplementedError("semantic and hybrid search are not built yet")

    def search(self, request: SearchRequest) -> SearchResult:
        """Run `request` to completion. Deterministic for a given index generation."""
        if request.mode is SearchMode.REGEX:
            from search_engine.regex import regex_search

            return regex_search(request, self.config)
        raise NotImplementedError("semantic and hybrid search are not built yet")
