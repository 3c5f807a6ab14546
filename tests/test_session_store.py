"""MemoryStore specifics: the sweeper, closing, refused limits; Session serialization (what the
Redis store relies on). The SessionStore contract itself (sliding TTL, LRU under both limits,
the dedup index, stats) runs against every backend in test_session_store_contract.py."""

from __future__ import annotations

import json
import threading
import weakref
from typing import Any

import msgspec
import pytest

from search_engine.models import Match, SearchResult
from sessions import MemoryStore, Session
from sessions.sweeper import Sweeper
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


def test_session_round_trips_through_json_and_bytes() -> None:
    s = session("round", 25, view=".matches | map(select(.line_start > 3))")
    s.result.warnings.append("partial: 1 file unreadable")
    s.result.matches[0] = msgspec.structs.replace(
        s.result.matches[0], ranks={"lexical": 1, "semantic": 3}, context_before=("a", "b")
    )
    assert Session.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    assert Session.from_bytes(s.to_bytes()) == s
