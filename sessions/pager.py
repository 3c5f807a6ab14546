"""Paging a search: run it once, keep the list as a session, walk it with sealed cursors.

The server calls `first_page` for a new search, and `resume` for a cursor, with two hooks: one
that checks the cursor's search before anything is served (its tool, its root, its arguments),
and one the pager calls just before it re-runs that search (the server waits there for the
index), so the caller never has to predict whether a page will search. Three paths serve a
page, reported as `Page.cache`:
- "miss": the search ran now and its list became a new session;
- "hit": the list came from a live session (same search, same index generation, same view);
- "restored": the cursor was valid but its session was gone (evicted, expired, restarted,
  another replica), so the search was re-run from the cursor and *proven* to give the same
  list (generation, length and digest) before continuing at the cursor's offset.
Restoring instead of failing is what lets a cursor outlive the process that issued it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Protocol

from search_engine import Match, SearchRequest, SearchResult
from sessions.cursor import SEARCH_KIND, CursorCodec, CursorState
from sessions.errors import CursorGenerationError, CursorMalformedError
from sessions.models import CacheStatus, Page, Session, dedup_key
from sessions.store import SessionStore

DEFAULT_PAGE_SIZE = 50
#: The largest page a call may ask for. Not a setting: a page's size in tokens is what a client
#: feels, and that is `offload.max_tokens`'s to bound (a larger page goes to a file); this only
#: stops one call asking the pager to materialise a huge page to offload, when paging is cheap.
MAX_PAGE_SIZE = 200

ViewFn = Callable[[SearchResult, str], SearchResult]
#: What a caller checks of a cursor's search before it is served (raise to refuse it).
CheckFn = Callable[[CursorState, SearchRequest], None]
#: What a caller does just before a cursor's search is run again (e.g. wait for its index).
RerunFn = Callable[[SearchRequest], None]


class SearchBackend(Protocol):
    """What the pager needs of `search_engine.SearchEngine`. `generation` is None when files
    changed that the index has not caught up with yet (no list may be reused then)."""

    def search(self, request: SearchRequest) -> SearchResult: ...

    def generation(self, request: SearchRequest) -> int | None: ...

    def recheck(self, request: SearchRequest, matches: list[Match]) -> list[Match]: ...


@dataclass(frozen=True, eq=False)
class Pager:
    """Serves pages of searches from a `SessionStore`, minting cursors with a `CursorCodec`.

    `view_fn(result, view)` derives the list actually paged from a search result (the server
    uses it for jq filters); only its matches and warnings are used. A viewed list is a session of
    its own, and its cursors carry the view so a restore re-runs search and view alike. Stateless
    itself (frozen): safe to share. `max_page_size` is `MAX_PAGE_SIZE` when not given, read when
    the pager is made.
    """

    engine: SearchBackend
    store: SessionStore
    codec: CursorCodec
    default_page_size: int = DEFAULT_PAGE_SIZE
    max_page_size: int = field(default_factory=lambda: MAX_PAGE_SIZE)
    view_fn: ViewFn | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.default_page_size <= self.max_page_size:
            raise ValueError(
                f"default_page_size ({self.default_page_size}) must be between 1 and max_page_size "
                f"({self.max_page_size})"
            )

    def first_page(
        self, request: SearchRequest, page_size: int | None = None, view: str | None = None, reuse: bool = True
    ) -> Page:
        """Page 1 of `request` (optionally viewed), reusing a live identical session if any.

        `reuse=False` searches afresh even then. Use it for results no index generation
        versions (regex reads the files as they are now): a cached list may predate an edit the
        caller just made, and an agent re-running a search to check its edit must see it.
        Cursors still walk the snapshot their own first page started."""
        started = time.perf_counter()
        size = self._page_size(page_size, self.default_page_size)
        if view is not None and self.view_fn is None:
            raise ValueError("a view was given but this pager has no view function configured")
        params_hash = request.params_hash()
        generation = self.engine.generation(request)
        # Reused only while the files are those of the index generation the list came from.
        reuse = reuse and generation is not None
        session = self.store.find(dedup_key(params_hash, generation or 0, view)) if reuse else None
        cache: CacheStatus = "hit"
        if session is None:
            session, cache = self._new_session(request, params_hash, generation or 0, view, reuse)
        return self._page(session, 0, size, cache, started)

    def resume(
        self,
        cursor: str,
        page_size: int | None = None,
        *,
        check: CheckFn | None = None,
        before_rerun: RerunFn | None = None,
    ) -> Page:
        """The page `cursor` points at, from its live session or restored.

        The cursor is verified first (authenticated before anything reads it, then its age and
        kind: `CursorError`), then its search rebuilt and given to `check(state, search)`, which
        may refuse it before anything is served or searched. `before_rerun(search)` is called
        only when the page needs the search run again (its session is gone and no live twin holds
        the same list), before the engine is asked anything of it: a caller waits there for
        what that search needs, which only the pager knows it is about to do."""
        state = self.codec.decode(cursor, kind=SEARCH_KIND)
        request = _request_of(state)
        if check is not None:
            check(state, request)
        started = time.perf_counter()
        size = self._page_size(page_size, state.page_size)
        session = self.store.get(state.session_id)
        if session is None:
            session = self._twin(state)
        cache: CacheStatus = "hit"
        if session is None:
            if before_rerun is not None:
                waited = time.perf_counter()
                before_rerun(request)
                started += time.perf_counter() - waited  # a wait for the index is not the page's time
            session, cache = self._rerun(state, request), "restored"
        return self._page(session, state.offset, size, cache, started, recheck=True)

    # -- sessions -----------------------------------------------------------------------

    def _new_session(
        self, request: SearchRequest, params_hash: str, generation: int, view: str | None, reuse: bool = True
    ) -> tuple[Session, CacheStatus]:
        base = self.store.find(dedup_key(params_hash, generation, None)) if view is not None and reuse else None
        result = base.result if base is not None else self.engine.search(request)
        session = self._keep(Session.create(request, self._apply_view(result, view), view))
        return session, "hit" if base is not None else "miss"

    def _twin(self, state: CursorState) -> Session | None:
        """A live session holding the very list the cursor walks (same search, generation and
        view, same digest), when its own session is gone."""
        twin = self.store.find(dedup_key(state.params_hash, state.index_generation, state.view))
        return twin if twin is not None and twin.digest == state.digest else None

    def _rerun(self, state: CursorState, request: SearchRequest) -> Session:
        """The cursor's list rebuilt by searching `request` again.

        Refuses with CursorGenerationError unless the rebuilt list is provably the one the
        cursor walked: same index generation, same length, same digest.
        """
        generation = self.engine.generation(request)
        if generation is None:
            raise CursorGenerationError("files changed since and the index is still catching up with them")
        if generation != state.index_generation:
            raise CursorGenerationError(f"index generation {state.index_generation} is now {generation}")
        result = self.engine.search(request)
        if result.index_generation != state.index_generation:
            raise CursorGenerationError(f"index generation {state.index_generation} is now {result.index_generation}")
        session = Session.create(request, self._apply_view(result, state.view), state.view)
        if session.total_count != state.total_count:
            raise CursorGenerationError(f"{state.total_count} results then, {session.total_count} now")
        if session.digest != state.digest:
            raise CursorGenerationError("the matching files were edited")
        return self._keep(session)

    def _apply_view(self, result: SearchResult, view: str | None) -> SearchResult:
        if view is None:
            return result
        if self.view_fn is None:
            raise ValueError("this cursor carries a view but this pager has no view function configured")
        viewed = self.view_fn(result, view)
        # The view decides the list (and may warn); totals, truncation, generation and timings
        # stay the search's, so a page can say "12 of 3,400 matches passed the view".
        return replace(result, matches=viewed.matches, warnings=[*result.warnings, *viewed.warnings])

    def _keep(self, session: Session) -> Session:
        if not self.store.put(session):
            warning = (
                f"This result (~{session.size / 2**20:.0f} MiB) exceeds the session memory budget and is "
                "not cached: each further page re-runs the search. Narrow the search to page faster."
            )
            # A copy: the result object may be shared (engine caches, identity views).
            session.result = replace(session.result, warnings=[*session.result.warnings, warning])
        return session

    # -- pages --------------------------------------------------------------------------

    def _page_size(self, requested: int | None, fallback: int) -> int:
        size = fallback if requested is None else requested
        if not 1 <= size <= self.max_page_size:
            raise ValueError(
                f"page_size must be between 1 and {self.max_page_size}, got {size}; "
                "ask for a smaller page and follow next_cursor for the rest"
            )
        return size

    def _page(
        self, session: Session, offset: int, size: int, cache: CacheStatus, started: float, recheck: bool = False
    ) -> Page:
        """The page at `offset`. `recheck`: a page served after its search (from a cursor) has
        its matches looked up in the files as they are now, so none shows old lines as current
        (`search_engine.live.recheck`); same rule whichever store kept the list, or if it was restored."""
        matches = session.result.matches[offset : offset + size]
        rechecked_at = None
        if recheck and matches:
            rechecked_at = time.time()
            matches = self.engine.recheck(session.request, matches)
        has_more = offset + len(matches) < session.total_count
        template = CursorState(
            session_id=session.id,
            offset=offset,
            page_size=size,
            params_hash=session.params_hash,
            index_generation=session.index_generation,
            total_count=session.total_count,
            digest=session.digest,
            request_json=session.request_json,
            view=session.view,
        )
        cursor_at = partial(_mint, self.codec, template)
        result = session.result
        return Page(
            matches=matches,
            offset=offset,
            page_size=size,
            total_count=session.total_count,
            search_total_count=result.total_count,
            truncated=result.truncated,
            has_more=has_more,
            next_cursor=cursor_at(offset + len(matches)) if has_more else None,
            cache=cache,
            session_id=session.id,
            request=session.request,
            view=session.view,
            index_generation=session.index_generation,
            search_time_ms=result.search_time_ms,
            index_time_ms=result.index_time_ms,
            page_time_ms=(time.perf_counter() - started) * 1000,
            warnings=[*result.warnings, *result.notices],
            freshness=result.freshness,
            rechecked_at=rechecked_at,
            _cursor_at=cursor_at,
            result=result,
        )


def _request_of(state: CursorState) -> SearchRequest:
    """The search a verified cursor pages, rebuilt from the parameters it carries."""
    try:
        return SearchRequest.model_validate_json(state.request_json)
    except ValueError:
        raise CursorMalformedError("its search cannot be rebuilt") from None


def _mint(codec: CursorCodec, template: CursorState, offset: int) -> str:
    return codec.encode(replace(template, offset=offset))
