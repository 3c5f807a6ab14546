"""MemoryStore: sliding TTL, LRU under both limits, the sweeper, the dedup index; Session
serialization (the contract a Redis store will rely on)."""

from __future__ import annotations

import json
import time
import weakref
from dataclasses import replace

import pytest

from search_engine.models import SearchResult
from sessions import MemoryStore, Session, SessionStore
from tests.session_fakes import FakeClock, make_matches, request_for


def session(query: str = "needle", n: int = 10, view: str | None = None) -> Session:
    matches = make_matches(n, query)
    return Session.create(request_for(query), SearchResult(matches, len(matches)), view)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def store_with(clock: FakeClock, **kw: object) -> MemoryStore:
    return MemoryStore(sweep_interval_s=None, clock=clock, **kw)


def test_memory_store_meets_the_protocol() -> None:
    with MemoryStore(sweep_interval_s=None) as store:
        assert isinstance(store, SessionStore)


def test_ttl_expires_after_last_access(clock: FakeClock) -> None:
    store = store_with(clock, ttl_s=10)
    s = session()
    store.put(s)
    clock.advance(8)
    assert store.get(s.id) is s  # refreshes: now expires at 18
    clock.advance(8)
    assert store.get(s.id) is s  # a fixed TTL would have dropped it at 10
    clock.advance(10.5)
    assert store.get(s.id) is None
    assert store.stats().expirations == 1


def test_touch_and_find_slide_the_ttl_too(clock: FakeClock) -> None:
    store = store_with(clock, ttl_s=10)
    a, b = session("a"), session("b")
    store.put(a)
    store.put(b)
    for _ in range(3):
        clock.advance(7)
        assert store.touch(a.id)
        assert store.find(b.key) is b
    assert store.get(a.id) is a and store.get(b.id) is b
    clock.advance(11)
    assert not store.touch(a.id)
    assert store.find(b.key) is None


def test_session_count_cap_evicts_least_recently_used(clock: FakeClock) -> None:
    store = store_with(clock, max_sessions=3)
    a, b, c, d = (session(q) for q in "abcd")
    for s in (a, b, c):
        store.put(s)
    assert store.get(a.id) is a  # b is now the least recently used
    store.put(d)
    assert store.get(b.id) is None
    assert all(store.get(s.id) is s for s in (a, c, d))
    stats = store.stats()
    assert (stats.sessions, stats.evictions) == (3, 1)


def test_memory_budget_evicts_least_recently_used(clock: FakeClock) -> None:
    a, b, c = session("a", 100), session("b", 100), session("c", 100)
    assert a.size == b.size == c.size
    store = store_with(clock, max_bytes=int(a.size * 2.5))
    store.put(a)
    store.put(b)
    store.get(a.id)
    store.put(c)  # only two fit: b (least recently used) goes
    assert store.get(b.id) is None
    assert store.get(a.id) is a and store.get(c.id) is c
    assert store.stats().bytes == a.size + c.size


def test_a_session_larger_than_the_budget_is_refused_without_evicting(clock: FakeClock) -> None:
    small, big = session("small", 5), session("big", 500)
    store = store_with(clock, max_bytes=big.size - 1)
    store.put(small)
    assert store.put(big) is False
    assert store.get(big.id) is None
    assert store.get(small.id) is small


def test_find_indexes_by_key_and_forgets_removed_sessions(clock: FakeClock) -> None:
    store = store_with(clock, max_sessions=2, ttl_s=10)
    first, second = session("q"), session("q")  # same search: same key
    assert first.key == second.key and first.id != second.id
    store.put(first)
    store.put(second)
    assert store.find(first.key) is second
    assert store.delete(first.id)
    assert store.find(first.key) is second  # deleting the older twin keeps the newer entry
    assert store.delete(second.id) and not store.delete(second.id)
    assert store.find(first.key) is None

    viewed = session("q", view=".matches[0]")
    assert viewed.key != first.key
    store.put(viewed)
    store.put(session("x"))
    store.put(session("y"))  # evicts `viewed`
    assert store.find(viewed.key) is None
    clock.advance(11)
    assert store.find(session("y").key) is None


def test_sweeper_returns_memory_without_any_traffic(clock: FakeClock) -> None:
    class TrackedList(list):  # weak-referenceable, unlike a plain list
        pass

    matches = TrackedList(make_matches(50))
    gone = weakref.ref(matches)
    store = MemoryStore(ttl_s=5, sweep_interval_s=0.01, clock=clock)
    try:
        store.put(Session.create(request_for(), SearchResult(matches, len(matches))))
        del matches
        time.sleep(0.05)
        assert gone() is not None  # not expired yet: the sweeper must keep it
        clock.advance(6)
        deadline = time.monotonic() + 5
        while gone() is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert gone() is None, "the sweeper did not drop the expired session"
    finally:
        store.close()
    assert store.stats().expirations == 1


def test_close_stops_the_sweeper_thread() -> None:
    store = MemoryStore(sweep_interval_s=0.01)
    sweeper = store._sweeper
    assert sweeper is not None and sweeper.is_alive()
    store.close()
    assert not sweeper.is_alive()
    store.close()  # idempotent


@pytest.mark.parametrize("kw", [{"ttl_s": 0}, {"max_sessions": 0}, {"max_bytes": 0}, {"sweep_interval_s": 0}])
def test_nonsense_limits_are_refused(kw: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="positive"):
        MemoryStore(**kw)


def test_session_round_trips_through_json_and_bytes() -> None:
    s = session("round", 25, view='.matches | map(select(.line_start > 3))')
    s.result.warnings.append("partial: 1 file unreadable")
    s.result.matches[0] = replace(s.result.matches[0], ranks={"lexical": 1, "semantic": 3}, context_before=("a", "b"))
    assert Session.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    assert Session.from_bytes(s.to_bytes()) == s
