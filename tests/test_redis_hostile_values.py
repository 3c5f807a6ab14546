"""Session blobs in Redis overwritten with values codepager never writes: the right outer shape
with fields of the wrong type, another session's blob, a decompression bomb. Anyone who can
write to Redis can plant one (and a bug could), and every replica sharing the namespace reads
it. Found by an audit: a wrong type crashed every page of the walk with a raw TypeError or
AttributeError (the session was never dropped, and each retry slid its TTL, so the crash
lasted), or was served as it was; a 1 MB blob inflated to 1 GB before it was found unreadable.

Real redis-server, real RedisStore, Pager and server; only the search engine is a fake where
the page walk is the point."""

from __future__ import annotations

import logging
import time
import tracemalloc
import zlib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec
import pytest
from fastmcp import Client

from search_engine.models import Match, MatchType, SearchResult
from server.app import build_app
from sessions import CursorCodec, Pager, Session
from sessions.redis_store import RedisStore, encode_session
from tests.server_helpers import make_settings, structured
from tests.session_fakes import SECRET, FakeEngine, make_matches, next_page, request_for

MB = 1 << 20
#: What the bomb inflates to: far past any cap below, small enough to build in under a second.
_BOMB_INFLATED = 256 * MB


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """A session blob as the store frames it (format byte, zlib) whose body is 256 MiB of
    zeros: about 260 KB, as the audit's 1 MB blob inflated to 1 GB."""
    packer = zlib.compressobj(6)
    zeros = bytes(16 * MB)
    body = b"".join(packer.compress(zeros) for _ in range(_BOMB_INFLATED // len(zeros))) + packer.flush()
    assert len(body) * 500 < _BOMB_INFLATED
    return b"\x01" + body


def blob_key(namespace: str, session_id: str) -> str:
    return f"codepager:{namespace}:s:{session_id}"


def rewritten(blob: bytes, change: Callable[[dict[str, Any]], None]) -> bytes:
    """`blob` decoded as the store writes it, `change`d, and framed again the same way."""
    record = msgspec.msgpack.decode(zlib.decompress(blob[1:]))
    change(record)
    return b"\x01" + zlib.compress(msgspec.msgpack.encode(record))


def _set(*path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(record: dict[str, Any]) -> None:
        for name in path[:-1]:
            record = record[name]
        record[path[-1]] = value

    return change


# The audit's values first (size "big" and None, view 5, total_count "x"), then the other
# fields a page or the local cache reads and used to take as they came. (A match of the wrong
# shape, null matches or a request that is not JSON text already failed to decode, and were
# dropped as garbage.)
WRONG_TYPES = {
    "size is text": _set("size", value="big"),
    "size is null": _set("size", value=None),
    "size is negative": _set("size", value=-(10**9)),
    "view is a number": _set("view", value=5),
    "total_count is text": _set("result", "total_count", value="x"),
    "id is a number": _set("id", value=5),
    "index_generation is text": _set("result", "index_generation", value="x"),
    "search_time_ms is NaN": _set("result", "search_time_ms", value=float("nan")),
}


@pytest.mark.parametrize("case", list(WRONG_TYPES), ids=list(WRONG_TYPES))
def test_a_blob_with_a_field_of_the_wrong_type_is_a_miss_and_the_walk_goes_on(
    redis_server, raw, namespace, caplog, case: str
) -> None:
    """Before: `size` text or null and `view` a number raised TypeError ('<=' not supported
    between 'str' and 'int') or AttributeError out of the page call, on every retry, since the
    blob was never dropped; `total_count` "x" was served as `search_total_count`; a negative
    size was served and shrank the local cache's count of what it holds. Now the blob is
    decoded as the types written: any other value makes it unreadable, exactly like garbage,
    so it is deleted and the page is restored by searching again from the cursor."""
    engine = FakeEngine()
    codec = CursorCodec(SECRET)
    with RedisStore(redis_server.url, namespace=namespace) as writer_store:
        first = Pager(engine, writer_store, codec).first_page(request_for(), page_size=10)
        key = blob_key(namespace, first.session_id)
        honest = raw.get(key)
        assert honest is not None and first.next_cursor is not None
        raw.set(key, rewritten(honest, WRONG_TYPES[case]), keepttl=True)

    with RedisStore(redis_server.url, namespace=namespace) as reader_store:  # another replica: nothing cached
        reader = Pager(engine, reader_store, codec)
        with caplog.at_level(logging.WARNING, logger="sessions.redis_store"):
            page = next_page(reader, first.next_cursor)
        assert "unreadable session" in caplog.text
        assert raw.exists(key) == 0
        assert page.cache == "restored" and engine.calls == 2
        assert page.matches == engine.expected()[10:20]
        assert page.search_total_count == 120 and page.total_count == 120
        # The restored session is kept in its place: the rest of the walk needs no search.
        assert reader.resume(page.next_cursor or "").cache == "hit"


def test_another_sessions_blob_under_this_id_is_not_served(redis_server, raw, namespace, caplog) -> None:
    """A blob copied from another key is a well-formed session, but not the one its key names:
    before, a page of the cursor's walk was cut from the other search's list (and the local
    cache filed that session under the wrong id). Now a blob whose id differs from its key's is
    unreadable too."""
    engine = FakeEngine()
    codec = CursorCodec(SECRET)
    with RedisStore(redis_server.url, namespace=namespace) as writer_store:
        writer = Pager(engine, writer_store, codec)
        mine = writer.first_page(request_for("needle"), page_size=10)
        other = writer.first_page(request_for("other"), page_size=10)
        copied = raw.get(blob_key(namespace, other.session_id))
        assert copied is not None and mine.next_cursor is not None
        raw.set(blob_key(namespace, mine.session_id), copied, keepttl=True)

    with (
        RedisStore(redis_server.url, namespace=namespace) as reader_store,
        caplog.at_level(logging.WARNING, logger="sessions.redis_store"),
    ):
        page = next_page(Pager(engine, reader_store, codec), mine.next_cursor)
    assert "unreadable session" in caplog.text
    assert page.cache == "restored"
    assert page.matches == engine.expected("needle")[10:20]


def _peak_while(call: Callable[[], object]) -> tuple[object, int, float]:
    """What `call` returns, the most memory Python allocated meanwhile, and the seconds it took."""
    tracemalloc.start()
    try:
        started = time.perf_counter()
        value = call()
        seconds = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return value, peak, seconds


@pytest.mark.slow
def test_a_decompression_bomb_is_refused_without_inflating_it(redis_server, raw, namespace, bomb, caplog) -> None:
    """Before: the blob was inflated whole, unbounded, and only then found unreadable (this
    one: 1.0 s and 558 MiB peak, zlib holding its 256 MiB output twice while joining it; the
    audit's 1 MB blob took the server to +1 GB RSS). Now a blob is inflated no further than
    the store's per-session cap (`max_session_bytes`, which `put` also enforces, so no honest
    session is longer): the bomb is unreadable one byte past the cap, a miss, and its key is
    deleted (0.03 s and 17 MiB peak for an 8 MiB cap; asserted: under 32 MiB and 3 s)."""
    s = Session.create(request_for(), SearchResult(make_matches(50), 50))
    with RedisStore(redis_server.url, namespace=namespace, max_session_bytes=8 * MB) as store:
        assert store.put(s)
    raw.set(blob_key(namespace, s.id), bomb, keepttl=True)

    with RedisStore(redis_server.url, namespace=namespace, max_session_bytes=8 * MB) as reader:
        with caplog.at_level(logging.WARNING, logger="sessions.redis_store"):
            got, peak, seconds = _peak_while(lambda: reader.get(s.id))
        assert got is None
        assert peak < 32 * MB, f"{peak / MB:.0f} MiB allocated to refuse the bomb"
        assert seconds < 3, f"{seconds:.1f} s to refuse the bomb"
        assert "unreadable session" in caplog.text
        assert raw.exists(blob_key(namespace, s.id)) == 0


@pytest.mark.slow
async def test_a_decompression_bomb_costs_a_server_no_more_than_its_session_budget(
    code_tree: Path, tmp_path: Path, redis_server, raw, namespace, bomb
) -> None:
    """The same bomb under a served cursor, against a server whose session budget
    (`sessions.max_memory_mb`) is 8 MiB, the per-session cap it gives its Redis store (as the
    in-process store keeps no session larger than its budget). Before: the page inflated all
    256 MiB (558 MiB allocated at the peak), then was restored. Now the page is restored the
    same way with 17 MiB allocated at the peak, search and answer included (asserted: under
    64 MiB)."""
    settings = make_settings(
        code_tree, tmp_path, sessions={"backend": redis_server.url, "namespace": namespace, "max_memory_mb": 8}
    )
    async with Client(build_app(settings)) as client:
        first = structured(await client.call_tool("regex_search", {"pattern": "def ", "page_size": 2}))
    cursor = first["pagination"]["next_cursor"]
    assert cursor is not None
    (key,) = raw.keys(f"codepager:{namespace}:s:*")
    raw.set(key, bomb, keepttl=True)

    async with Client(build_app(settings)) as client:  # another replica: nothing cached
        tracemalloc.start()
        try:
            second = structured(await client.call_tool("regex_search", {"cursor": cursor}))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert second["results"]["count"] == 2
    assert peak < 64 * MB, f"{peak / MB:.0f} MiB allocated to serve the page"
    assert raw.exists(key) == 0


def test_an_honest_session_round_trips_in_the_same_bytes(redis_server, namespace) -> None:
    """The typed reading must take every value an honest writer puts there: a view, warnings,
    context lines, ranks, scores, languages, text that is not ASCII, a truncated search, an
    index generation and timings. The bytes are still the session's msgpack (`Session.to_bytes`,
    byte for byte what the msgpack package wrote: tests/test_session_store.py), zlib level 1,
    behind the format byte: blobs written before the change read the same."""
    matches = [
        Match(
            path="src/naïve/日本.py",
            line_start=3,
            line_end=5,
            byte_start=40,
            byte_end=90,
            content="def naïve():  # 日本語",
            type=MatchType.HYBRID,
            language="python",
            score=0.5,
            context_before=("a", ""),
            context_after=("ünïcode",),
            ranks={"lexical": 1, "semantic": 4},
        ),
        *make_matches(30),
    ]
    result = SearchResult(
        matches, 5_000, truncated=True, index_generation=7, search_time_ms=1.25, index_time_ms=0.0, warnings=["w"]
    )
    s = Session.create(request_for("naïve", include=("*.py",), context_lines=2), result, view=".[] | select(.x)")
    assert encode_session(s) == b"\x01" + zlib.compress(s.to_bytes(), 1)
    with (
        RedisStore(redis_server.url, namespace=namespace) as writer,
        RedisStore(redis_server.url, namespace=namespace) as reader,
    ):
        assert writer.put(s)
        got = reader.get(s.id)
        assert got is not None and replace(got, last_access=0) == replace(s, last_access=0)
        assert reader.find(s.key) is got  # the decoded copy is kept and found by key


def test_a_session_longer_than_the_cap_is_not_kept_and_one_within_it_is(redis_server, namespace) -> None:
    """What a read may inflate is what `put` lets in: a session whose encoding is longer than
    `max_session_bytes` is refused (False, like one over the memory budget, so the pager warns
    and re-runs the search), never stored only to be unreadable on every later page."""
    small = Session.create(request_for("small"), SearchResult(make_matches(100), 100))
    big = Session.create(request_for("big"), SearchResult(make_matches(2_000), 2_000))
    cap = len(small.to_bytes())
    with RedisStore(redis_server.url, namespace=namespace, max_session_bytes=cap) as store:
        assert store.put(small) and store.get(small.id) is not None
        assert not store.put(big)
        assert store.get(big.id) is None and store.stats().sessions == 1
