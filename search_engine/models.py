"""The types every search mode shares: what is asked (`SearchRequest`) and what is found.

`SearchRequest` is a frozen pydantic model because it crosses boundaries: a cursor carries its
normalized JSON and the params hash is taken over it, so two requests that mean the same search
must serialize identically. Presentation options (snippet length, page size, output mode) are
deliberately *not* part of it: changing them must not invalidate a cursor or split a cache entry.

`Match` is a frozen msgspec Struct and `SearchResult` a plain dataclass: matches are built in
hot loops (tens of thousands of ripgrep events) where pydantic validation would cost more than
the search itself.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Annotated, Any, Literal

import msgspec
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_CONTEXT_LINES = 10
DEFAULT_MAX_RESULTS = 10_000
#: Results a semantic or hybrid search returns when the caller names no `top_k`.
DEFAULT_TOP_K = 10
#: Types whose bounds msgspec checks where a result is read back from outside the process (a
#: Redis session): a count or generation is never negative, a duration never negative or NaN.
Count = Annotated[int, msgspec.Meta(ge=0)]
Millis = Annotated[float, msgspec.Meta(ge=0)]
#: Bytes of one reference in a tuple (CPython, 64-bit), for `Match.approx_size`.
_SLOT = 8


class SearchMode(str, Enum):
    REGEX = "regex"
    SEMANTIC = "semantic"
    HYBRID = "hybrid"


class MatchType(str, Enum):
    REGEX = "regex_match"
    SEMANTIC = "semantic_match"
    HYBRID = "hybrid_match"


class SearchRequest(BaseModel):
    """One search, fully specified. Immutable and hashable.

    `root` is an absolute, resolved directory (the allowed root the search runs under);
    `path` is an optional sub-path relative to it. `roots`, when set, are every root a search
    with no `path` covers, in the server's order (`root` is the first): the search runs in
    each and its matches are labelled by their root (`Match.path` absolute). Validation of
    these against the filesystem happens in `search_engine.files.paths`, not here, so a request can
    be rebuilt from a cursor without touching the disk.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: SearchMode = SearchMode.REGEX
    query: str
    root: str
    path: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    ignore_case: bool = False
    fixed_string: bool = False
    whole_word: bool = False
    multiline: bool = False
    context_lines: int = Field(default=0, ge=0, le=MAX_CONTEXT_LINES)
    max_results: int = Field(default=DEFAULT_MAX_RESULTS, ge=1)
    top_k: int = Field(default=DEFAULT_TOP_K, ge=1)
    threshold: float | None = None
    roots: tuple[str, ...] = ()

    @field_validator("include", "exclude", mode="before")
    @classmethod
    def _globs_as_tuple(cls, v: Any) -> Any:
        if v is None:
            return ()
        if isinstance(v, str):
            return (v,)
        return tuple(v)

    @field_validator("query", "path", "include", "exclude")
    @classmethod
    def _passable_to_a_process(cls, v: Any) -> Any:
        """Refuse text no command line or file name can carry (it would crash the search)."""
        for text in v if isinstance(v, tuple) else (v,):
            if text is None:
                continue
            if "\x00" in text:
                raise ValueError("contains a NUL character, which no pattern or file name can hold")
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError("contains an unpaired surrogate (invalid Unicode); send valid UTF-8 text") from None
        return v

    @field_validator("path", mode="before")
    @classmethod
    def _empty_path_is_root(cls, v: Any) -> Any:
        if v in ("", "."):
            return None
        return v

    @model_validator(mode="after")
    def _roots_are_several_and_start_at_root(self) -> SearchRequest:
        if self.roots and (
            len(self.roots) < 2 or self.roots[0] != self.root or len(set(self.roots)) != len(self.roots)
        ):
            raise ValueError("roots, when given, are two or more distinct roots, the first of them `root`")
        if self.roots and self.path is not None:
            raise ValueError("a search of several roots has no path: a path picks one root")
        return self

    @property
    def searched_roots(self) -> tuple[str, ...]:
        """Every root this search runs in, in order."""
        return self.roots or (self.root,)

    def in_root(self, root: str) -> SearchRequest:
        """This search, in `root` alone (one of `searched_roots`)."""
        return self.model_copy(update={"root": root, "roots": ()})

    def canonical_json(self) -> str:
        """Stable JSON: sorted keys, no whitespace. What a cursor carries and the hash covers.
        `roots` is left out when unset, so a one-root search hashes as it did before it existed."""
        return json.dumps(
            self.model_dump(mode="json", exclude=None if self.roots else {"roots"}),
            sort_keys=True,
            separators=(",", ":"),
        )

    def params_hash(self) -> str:
        """Short digest identifying this search; equal requests give equal hashes."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()[:24]


class Match(msgspec.Struct, frozen=True, gc=False):
    """One hit. `path` is relative to the request root, with forward slashes; in a search of
    several roots (`SearchRequest.roots`) it is absolute, its root joined with that, so each
    match says which root it is in and the path can be passed back as `path`.

    Immutable, because the same objects sit in the session cache and in every page cut from
    it (derive changed copies with `msgspec.structs.replace`). A msgspec Struct rather than a
    dataclass because it is built once per ripgrep event: its constructor runs in C, frozen
    or not, and measured 0.32 µs against 0.55 µs for a slotted dataclass (a frozen dataclass
    costs more still, setting each field through `object.__setattr__`). `gc=False`: a match
    holds only strings, numbers, tuples of strings and a dict of ints, so it can never be
    part of a reference cycle and the cyclic collector need not track 10^5 of them.

    Lines are 1-based and inclusive; bytes are 0-based offsets into the file, end-exclusive.
    For regex matches `content` is the (possibly width-cut) matching line(s); for semantic and
    hybrid matches it is the chunk text. `ranks` holds the component ranks of a hybrid match
    (e.g. {"lexical": 1, "semantic": 4}) so an agent can see why it matched. `changed` is set
    only on a page served after its file changed (`search_engine.live.recheck`): "moved" (lines
    corrected), "edited" (these lines no longer hold this text), "deleted" or "unchecked".
    """

    path: str
    line_start: int
    line_end: int
    byte_start: int
    byte_end: int
    content: str
    type: MatchType
    language: str | None = None
    score: float | None = None
    context_before: tuple[str, ...] = ()
    context_after: tuple[str, ...] = ()
    ranks: dict[str, int] | None = None
    changed: str | None = None

    def to_dict(self) -> dict[str, Any]:
        # msgspec's conversion, in C, from the struct's own field list: every field in order,
        # `type` as its value, the context lines as tuples (msgpack and JSON write them as arrays,
        # as they did lists). A deep copy like `asdict` made serializing a 10,000-match session
        # (Redis store) take ~0.5 s; this takes ~10 ms, ~15% less than a dict spelled out by hand.
        record: dict[str, Any] = msgspec.to_builtins(self)
        return record

    def approx_size(self) -> int:
        """Bytes held in memory, for the session store's memory budget: the struct and its
        content (the path is shared by a file's matches), and each context line whole, with its
        string header and its slot in the tuple. Counting a context line by its length alone
        made 10 lines of context a match weigh 6.7x less than they do (found by an audit:
        249 MB counted, 1.8 GB held)."""
        lines = self.context_before + self.context_after
        return 200 + len(self.path) + len(self.content) + sum(map(sys.getsizeof, lines)) + _SLOT * len(lines)


FreshnessState = Literal["current", "updating", "unverified"]
Detection = Literal["events", "polling", "direct"]


@dataclass(slots=True)
class Freshness:
    """What state of the files a search's results reflect (see `search_engine.live.read_your_writes`).

    `state` is `current` when every change completed before the call began (`as_of`,
    wall-clock seconds) is in the results; `updating` when `pending_count` changed paths (the
    first ones in `pending`; a directory covers what is beneath it, "" the whole root) were not
    folded into the index in time and are left out of the results; `unverified` when changes
    could not be checked in time, so the results reflect the files as of `verified_at`.
    `detection` is how changes are found: `events` (file events), `polling` (a listing of the
    tree each search; `reason` says why) or `direct` (regex: ripgrep reads the files)."""

    state: FreshnessState
    as_of: float
    verified_at: float
    detection: Detection
    pending_count: Count = 0
    pending: list[str] = field(default_factory=list)
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # every field, `pending` copied


@dataclass(slots=True)
class SearchResult:
    """The full, ordered result of one search.

    `total_count` is the true number of hits when it is known, which may exceed
    `len(matches)` when the search was cut at `max_results` (then `truncated` is true).
    `index_generation` pins the index state the results came from (0 for regex, which has no
    index); a cursor refuses to continue across a generation change. `warnings` say what went
    wrong or may be missing; `notices` what rules left out of the search and how to take it in
    (advice: a person at a terminal sees them only when nothing was found).

    `best_similarity` (semantic and hybrid) is the best cosine similarity of the query with a
    chunk the search could rank: an absolute measure, where scores are relative (hybrid's best
    is always 1.0). `low_relevance` says it is below where questions the code does not answer
    land (`search_engine.ranking.search.low_relevance`), with a warning saying what to do.
    """

    matches: list[Match]
    total_count: Count
    truncated: bool = False
    index_generation: Count = 0
    search_time_ms: Millis = 0.0
    index_time_ms: Millis = 0.0
    warnings: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    freshness: Freshness | None = None
    best_similarity: float | None = None
    low_relevance: bool = False

    def approx_size(self) -> int:
        return 256 + sum(m.approx_size() for m in self.matches)

    def to_dict(self) -> dict[str, Any]:
        return {
            "matches": [m.to_dict() for m in self.matches],
            "total_count": self.total_count,
            "truncated": self.truncated,
            "index_generation": self.index_generation,
            "search_time_ms": self.search_time_ms,
            "index_time_ms": self.index_time_ms,
            "warnings": list(self.warnings),
            "notices": list(self.notices),
            "freshness": self.freshness.to_dict() if self.freshness is not None else None,
            "best_similarity": self.best_similarity,
            "low_relevance": self.low_relevance,
        }
