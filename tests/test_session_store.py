"""MemoryStore specifics: the sweeper, closing, refused limits; Session serialization (what the
Redis store relies on). The SessionStore contract itself (sliding TTL, LRU under both limits,
the dedup index, stats) runs against every backend in test_session_store_contract.py."""

from __future__ import annotations

import threading
import weakref
from typing import Any

import msgspec
import pytest

from infra import Sweeper
from search_engine.models import Match, SearchResult
from sessions import MemoryStore, Session
from tests.session_fakes import FakeClock, make_matches, request_for


def session(query: str = "needle", n: int = 10, view: str | None = None) -> Session:
    matches = make_matches(n, query)
    return Session.create(request_for(query), SearchResult(matches, len(matches)), view)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_sweeper_returns_memory_without_any_traffic(clock: FakeClock) -> None:
    """The sweeper thread alone (no store call after the put) drops a session once the clock
    says it has expired, and keeps it before. Each step waits for a whole sweep to finish (an
    event, bounded), so what is asserted never depends on how fast the thread runs."""

    class TrackedList(list[Match]):  # weak-referenceable, unlike a plain list
        pass

    matches = TrackedList(make_matches(50))
    gone = weakref.ref(matches)
    store = MemoryStore(ttl_s=5, sweep_interval_s=0.01, clock=clock)
    sweeper = store._sweeper
    assert sweeper is not None
    swept = threading.Condition()
    sweeps = 0
    sweep = sweeper._sweep

    def counted() -> object:
        nonlocal sweeps
        result = sweep()
        with swept:
            sweeps += 1
            swept.notify_all()
        return result

    def two_more_sweeps() -> None:
        """Two, so that one began after the call: a sweep under way may have read the clock before."""
        with swept:
            target = sweeps + 2
            assert swept.wait_for(lambda: sweeps >= target, timeout=30), "the sweeper thread stopped sweeping"

    sweeper._sweep = counted
    try:
        store.put(Session.create(request_for(), SearchResult(matches, len(matches))))
        del matches
        two_more_sweeps()
        assert gone() is not None  # not expired yet: the sweeper must keep it
        clock.advance(6)
        two_more_sweeps()
        assert gone() is None, "the sweeper did not drop the expired session"
    finally:
        store.close()
    assert store.stats().expirations == 1


def test_a_zero_interval_sweeps_on_each_check_and_starts_no_thread(clock: FakeClock) -> None:
    swept: list[float] = []
    sweeper = Sweeper(lambda: swept.append(clock()), 0, name="t", clock=clock)
    sweeper.maybe_sweep()
    sweeper.maybe_sweep()
    assert len(swept) == 2
    with pytest.raises(ValueError, match="positive sweep_interval_s"):
        sweeper.start()  # a thread would sweep in a loop without pause
    assert not sweeper.is_alive()


def test_close_stops_the_sweeper_thread() -> None:
    store = MemoryStore(sweep_interval_s=0.01)
    sweeper = store._sweeper
    assert sweeper is not None and sweeper.is_alive()
    store.close()
    assert not sweeper.is_alive()
    store.close()  # idempotent


@pytest.mark.parametrize("kw", [{"ttl_s": 0}, {"max_sessions": 0}, {"max_bytes": 0}, {"sweep_interval_s": 0}])
def test_nonsense_limits_are_refused(kw: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="positive"):
        MemoryStore(**kw)


def test_session_round_trips_through_bytes() -> None:
    s = session("round", 25, view=".matches | map(select(.line_start > 3))")
    s.result.warnings.append("partial: 1 file unreadable")
    s.result.matches[0] = msgspec.structs.replace(
        s.result.matches[0], ranks={"lexical": 1, "semantic": 3}, context_before=("a", "b")
    )
    assert Session.from_bytes(s.to_bytes()) == s


#: A session's bytes as codepager wrote them with the msgpack package (`packb(to_dict(),
#: use_bin_type=True)`), before msgspec wrote them: one match, integers of several widths, floats,
#: a bool, text that is not ASCII. Redis may hold blobs an older replica wrote.
_WRITTEN_BY_MSGPACK = (
    b"\x89\xa2id\xd9 00000000000000000000000000000000\xa7r"
    b'equest\xd9!{"query":"na\xc3\xafve","root":"/repo"'
    b"}\xabparams_hash\xb8b3731c8d8f84fbfc682f5316\xa4v"
    b"iew\xa3.[]\xa6result\x87\xa7matches\x91\x8c\xa4path\xadsrc/na\xc3\xafv"
    b"e.py\xaaline_start\x03\xa8line_end\x05\xaabyte_start(\xa8b"
    b"yte_end\xce\x00\x01\x11p\xa7content\xb2def na\xc3\xafve(): pass\xa4"
    b"type\xachybrid_match\xa8language\xa6python\xa5score\xcb"
    b"?\xe0\x00\x00\x00\x00\x00\x00\xaecontext_before\x91\xa1a\xadcontext_after"
    b"\x90\xa5ranks\x82\xa7lexical\x01\xa8semantic\xcd\x01,\xabtotal_coun"
    b"t\xce\x00LK@\xa9truncated\xc3\xb0index_generation\x07\xaesear"
    b"ch_time_ms\xcb?\xf4\x00\x00\x00\x00\x00\x00\xadindex_time_ms\xcb\x00\x00\x00\x00\x00\x00"
    b"\x00\x00\xa8warnings\x91\xa1w\xa6digest\xb81c0287d159f48bc2c7"
    b"4f1df3\xa4size\xcd\x02B\xaacreated_at\xcbA\xd6Z\x0b\xc0\x00\x00\x00\xablast_"
    b"access\xcbA\xd6Z\x0b\xc0\x10\x00\x00"
)


def test_a_session_the_msgpack_writer_wrote_reads_and_is_written_byte_for_byte() -> None:
    """The encoding is still that msgpack: a blob an older version left in Redis reads back,
    and what this version writes for it (with the result fields added since: freshness,
    relevance, notices) reads back as the same session."""
    s = Session.from_bytes(_WRITTEN_BY_MSGPACK)
    assert (s.id, s.request.query, s.view, s.size, s.last_access) == ("0" * 32, "naïve", ".[]", 578, 1.5e9 + 0.25)
    (match,) = s.result.matches
    assert (match.byte_end, match.ranks, match.context_before) == (70_000, {"lexical": 1, "semantic": 300}, ("a",))
    assert (s.result.total_count, s.result.truncated) == (5_000_000, True)
    assert Session.from_bytes(s.to_bytes()) == s
