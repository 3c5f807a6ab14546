"""Deterministic stand-ins for the session tests: a fake search engine and a settable clock.

The fake engine lets property tests generate result lists of any size in microseconds; the real
ripgrep path is exercised separately in test_pager.py.
"""

from __future__ import annotations

import threading
from typing import Any

from search_engine.models import Match, MatchType, SearchRequest, SearchResult
from sessions import Page, Pager

SECRET = "session-tests-secret-key-0123456789"


class FakeClock:
    """A clock the test moves by hand (thread-safe enough: float assignment is atomic)."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def next_page(pager: Pager, cursor: str, page_size: int | None = None) -> Page:
    """The page `cursor` points at, as the server serves it with nothing to check and no
    index to wait for. `page_size` overrides the cursor's."""
    return pager.resume(cursor, page_size)


def make_matches(n: int, tag: str = "") -> list[Match]:
    return [
        Match(
            path=f"src/{tag}mod{i // 7}.py",
            line_start=i + 1,
            line_end=i + 1,
            byte_start=i * 40,
            byte_end=i * 40 + 12,
            content=f"needle {tag}{i}",
            type=MatchType.REGEX,
        )
        for i in range(n)
    ]


def request_for(query: str = "needle", **kw: Any) -> SearchRequest:
    return SearchRequest(query=query, root="/repo", **kw)


class FakeEngine:
    """Returns `sizes[query]` matches (default `default_size`), tagged by query and `edition`.

    Bumping `edition` simulates edited files (same count, different content); `gen` simulates
    an index rebuild. `calls` counts searches so tests can prove dedup and cache hits.
    """

    def __init__(self, default_size: int = 120, sizes: dict[str, int] | None = None) -> None:
        self.default_size = default_size
        self.sizes = dict(sizes or {})
        self.gen = 0
        self.edition = 0
        self.calls = 0
        self._lock = threading.Lock()

    def generation(self, request: SearchRequest) -> int:
        return self.gen

    def recheck(self, request: SearchRequest, matches: list[Match]) -> list[Match]:
        """Its files exist nowhere: the list as it was (the real recheck: test_live_pages.py)."""
        return matches

    def search(self, request: SearchRequest) -> SearchResult:
        with self._lock:
            self.calls += 1
        matches = self.expected(request.query)
        return SearchResult(matches=matches, total_count=len(matches), index_generation=self.gen, search_time_ms=1.5)

    def expected(self, query: str = "needle") -> list[Match]:
        """The list a search for `query` returns right now."""
        return make_matches(self.sizes.get(query, self.default_size), f"{query}-e{self.edition}-")
