"""What the session layer keeps (`Session`) and what it hands out (`Page`).

A `Session` is one search's full, ordered result list plus what identifies it. It round-trips
through msgpack bytes (`to_bytes`, of the plain dict `to_dict`) because stores other than the
in-process one (Redis) keep it outside Python objects. It is read back only as the types written (msgspec, like the
index's tables): what comes back from outside the process may have been written by anyone
who can write there, and a value of another type (a `size` that is text, a `view` that is a
number) must fail the read, not a page served from it later.

A `Page` is a window onto a session. It carries a private cursor minter so the output layer can
`cut()` it to fit a size budget and still hand out a cursor that loses nothing.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import msgspec

from search_engine import Count, Freshness, Match, SearchRequest, SearchResult

CacheStatus = Literal["miss", "hit", "restored"]


def dedup_key(params_hash: str, index_generation: int, view: str | None) -> str:
    """The identity of a session's list: same search, same index state, same view.

    Two first pages with equal keys are served from one session instead of searching twice.
    The view is hashed so arbitrary filter text never becomes part of a store key verbatim.
    """
    view_part = "-" if view is None else hashlib.sha256(view.encode()).hexdigest()[:16]
    return f"{params_hash}:{index_generation}:{view_part}"


def result_digest(matches: Sequence[Match]) -> str:
    """Fingerprint of an ordered match list.

    A cursor carries it so that a restore (session gone, search re-run) can prove the re-run
    produced the very same list; otherwise an edited file could silently shift results and the
    walk would skip or repeat some. Covers position and text, not scores.
    """
    h = hashlib.blake2b(digest_size=12)
    for m in matches:
        h.update(f"{m.path}\0{m.line_start}\0{m.byte_start}\0{m.byte_end}\0{m.content}\n".encode())
    return h.hexdigest()


@dataclass(slots=True)
class Session:
    """One search's full result list (after the optional view), kept between pages.

    `result.matches` is the list pages are cut from; `size` is its approximate memory cost,
    computed once because the memory budget consults it on every insert. `request_json` is the
    request with defaults left out, enough to rebuild it. Times are wall-clock
    seconds so they stay meaningful when the session is stored by another process.
    """

    id: str
    request: SearchRequest
    request_json: str
    params_hash: str
    view: str | None
    result: SearchResult
    digest: str
    size: int
    created_at: float
    last_access: float

    @classmethod
    def create(cls, request: SearchRequest, result: SearchResult, view: str | None = None) -> Session:
        # Defaults left out: every cursor carries this, and agents pay tokens for cursor length.
        request_json = request.model_dump_json(exclude_defaults=True)
        now = time.time()
        return cls(
            id=uuid.uuid4().hex,
            request=request,
            request_json=request_json,
            params_hash=request.params_hash(),
            view=view,
            result=result,
            digest=result_digest(result.matches),
            size=result.approx_size() + len(request_json) + len(view or ""),
            created_at=now,
            last_access=now,
        )

    @property
    def total_count(self) -> int:
        """Length of the list pages walk (may differ from result.total_count: truncation, view)."""
        return len(self.result.matches)

    @property
    def index_generation(self) -> int:
        return self.result.index_generation

    @property
    def key(self) -> str:
        """What an identical search finds this list by; a list that left out files not yet in
        the index (freshness not `current`) is never found so: its own id makes the key unique."""
        key = dedup_key(self.params_hash, self.index_generation, self.view)
        freshness = self.result.freshness
        return key if freshness is None or freshness.state == "current" else f"{key}:{self.id}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "request": self.request_json,
            "params_hash": self.params_hash,
            "view": self.view,
            "result": self.result.to_dict(),
            "digest": self.digest,
            "size": self.size,
            "created_at": self.created_at,
            "last_access": self.last_access,
        }

    def to_bytes(self) -> bytes:
        """`to_dict` as msgpack (the bytes the msgpack package wrote before msgspec did)."""
        return msgspec.msgpack.encode(self.to_dict())

    @classmethod
    def from_bytes(cls, data: bytes) -> Session:
        """The inverse of `to_bytes`; ValueError (msgspec's DecodeError or ValidationError, or
        pydantic's for the request) at the first value that is not of the type written."""
        try:
            stored = msgspec.msgpack.decode(data, type=_StoredSession)
        except RecursionError:  # an unknown field nested thousands deep, which msgspec skips by recursing
            raise ValueError("nested too deeply") from None
        fields = msgspec.structs.asdict(stored)  # every field but the request is the Session's own
        request_json = fields.pop("request")
        return cls(request=SearchRequest.model_validate_json(request_json), request_json=request_json, **fields)


class _StoredSession(msgspec.Struct):
    """`Session.to_dict()` as read back (see the module doc)."""

    id: str
    request: str
    params_hash: str
    view: str | None
    result: SearchResult  # a dataclass msgspec reads field by field, its constraints checked
    digest: str
    size: Count
    created_at: float
    last_access: float


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a session, ready for the output layer.

    `total_count` is the length of the session's list (after the view); `search_total_count`
    and `truncated` are the search's own totals, which can be larger when the search stopped
    at max_results. After a lossless cut the following page starts mid-way through a page of
    `page_size`: it is numbered as the next page, and `total_pages` counts what is left after
    it, so the numbers stay consistent with `next_cursor` (offsets remain the truth).
    """

    matches: list[Match]
    offset: int
    page_size: int
    total_count: int
    search_total_count: int
    truncated: bool
    has_more: bool
    next_cursor: str | None
    cache: CacheStatus
    session_id: str
    request: SearchRequest
    view: str | None
    index_generation: int
    search_time_ms: float
    index_time_ms: float
    page_time_ms: float
    warnings: list[str] = field(default_factory=list)
    #: The state of the files the list reflects (its search's), and when this page's matches
    #: were re-checked against the files (pages served from a cursor), else None.
    freshness: Freshness | None = None
    rechecked_at: float | None = None
    _cursor_at: Callable[[int], str] | None = field(default=None, repr=False, compare=False)
    #: The session's whole list (shared, not copied): what stats over "all results" read.
    result: SearchResult | None = field(default=None, repr=False, compare=False)

    @property
    def current_page(self) -> int:
        """1-based and never decreasing along a walk; a page that starts mid-way through a page of
        `page_size` (after a lossless cut) counts as the next one."""
        return -(-self.offset // self.page_size) + 1

    @property
    def total_pages(self) -> int:
        """This page's number plus the pages of `page_size` still left after it, so a cut page
        that has a next cursor never claims to be the last."""
        remaining = max(0, self.total_count - self.offset - len(self.matches))
        return self.current_page + -(-remaining // self.page_size)

    def cut(self, n: int) -> Page:
        """The first `n` matches of this page, with a cursor that resumes at the first one left out.

        Lossless: walking on from the cut page's cursor yields exactly the omitted matches
        next. `cut(0)` is allowed and returns an empty page whose cursor points at this page's
        own offset. An output layer that gets there because one match alone exceeds its
        budget must not just return that page (the agent would follow the cursor and be handed
        the same oversized match forever): it offloads the page to a file instead.
        """
        if not 0 <= n <= len(self.matches):
            raise ValueError(f"cut({n}) is outside 0..{len(self.matches)} for a page of {len(self.matches)} matches")
        if n == len(self.matches):
            return self
        if self._cursor_at is None:
            raise ValueError("this page was not issued by a Pager and cannot mint a cursor")
        return replace(self, matches=self.matches[:n], has_more=True, next_cursor=self._cursor_at(self.offset + n))
