"""The SessionStore contract, run against every backend: MemoryStore and RedisStore (a real
redis-server). Same tests, same expectations: sliding TTL, LRU under the count cap and the
memory budget, the dedup index, delete, stats. Each backend's budget counts its own unit of
memory (in-process `Session.size`, or the compressed bytes Redis holds), given by `cost`.

Returned sessions are compared by value: Redis hands back decoded copies."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from search_engine.models import SearchResult
from sessions import MemoryStore, Session, SessionStore
from sessions.redis_store import RedisStore, encode_session
from tests.session_fakes import FakeClock, make_matches, request_for


def session(query: str = "needle", n: int = 10, view: str | None = None) -> Session:
    matches = make_matches(n, query)
    return Session.create(request_for(query), SearchResult(matches, len(matches)), view)


@dataclass
class Backend:
    name: str
    make: Callable[..., SessionStore]
    cost: Callable[[Session], int]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["memory", "redis"])
def backend(request: pytest.FixtureRequest, clock: FakeClock) -> Iterator[Backend]:
    stores: list[SessionStore] = []
    if request.param == "memory":

        def make(**kw: Any) -> SessionStore:
            stores.append(MemoryStore(sweep_interval_s=None, clock=clock, **kw))
            return stores[-1]

        yield Backend("memory", make, lambda s: s.size)
    else:
        url = request.getfixturevalue("redis_server").url
        namespace = f"t{uuid.uuid4().hex[:12]}"

        def make(**kw: Any) -> SessionStore:  # every call is another replica on the same namespace
            stores.append(RedisStore(url, namespace=namespace, clock=clock, **kw))
            return stores[-1]

        yield Backend("redis", make, lambda s: len(encode_session(s)))
    for store in stores:
        store.close()


def test_meets_the_protocol(backend: Backend) -> None:
    assert isinstance(backend.make(), SessionStore)


def test_ttl_slides_on_get(backend: Backend, clock: FakeClock) -> None:
    store = backend.make(ttl_s=10)
    s = session()
    assert store.put(s)
    clock.advance(8)
    assert store.get(s.id) == s  # refreshes: now expires at 18
    clock.advance(8)
    assert store.get(s.id) == s  # a fixed TTL would have dropped it at 10
    clock.advance(10.5)
    assert store.get(s.id) is None
    assert store.stats().expirations == 1


def test_find_slides_the_ttl_too(backend: Backend, clock: FakeClock) -> None:
    store = backend.make(ttl_s=10)
    s = session()
    store.put(s)
    for _ in range(3):
        clock.advance(7)
        assert store.find(s.key) == s
    clock.advance(11)
    assert store.find(s.key) is None


def test_session_count_cap_evicts_least_recently_used(backend: Backend) -> None:
    store = backend.make(max_sessions=3)
    a, b, c, d = (session(q) for q in "abcd")
    for s in (a, b, c):
        store.put(s)
    assert store.get(a.id) == a  # b is now the least recently used
    store.put(d)
    assert store.get(b.id) is None
    assert all(store.get(s.id) == s for s in (a, c, d))
    stats = store.stats()
    assert (stats.sessions, stats.evictions) == (3, 1)


def test_memory_budget_evicts_least_recently_used(backend: Backend) -> None:
    a, b, c = session("a", 100), session("b", 100), session("c", 100)
    cost = {s.id: backend.cost(s) for s in (a, b, c)}  # before access changes last_access
    store = backend.make(max_bytes=int(max(cost.values()) * 2.5))
    store.put(a)
    store.put(b)
    store.get(a.id)
    store.put(c)  # only two fit: b (least recently used) goes
    assert store.get(b.id) is None
    assert store.get(a.id) == a and store.get(c.id) == c
    assert store.stats().bytes == cost[a.id] + cost[c.id]


def test_a_session_larger_than_the_budget_is_refused_without_evicting(backend: Backend) -> None:
    small, big = session("small", 5), session("big", 500)
    store = backend.make(max_bytes=backend.cost(big) - 1)
    assert store.put(small)
    assert store.put(big) is False
    assert store.get(big.id) is None
    assert store.get(small.id) == small


def test_find_indexes_by_key_and_forgets_removed_sessions(backend: Backend, clock: FakeClock) -> None:
    store = backend.make(max_sessions=2, ttl_s=10)
    first, second = session("q"), session("q")  # same search: same key
    assert first.key == second.key and first.id != second.id
    store.put(first)
    store.put(second)
    assert store.find(first.key) == second
    store.put(session("x"))  # evicts `first`, the least recently used
    assert store.get(first.id) is None
    assert store.find(first.key) == second  # evicting the older twin keeps the newer entry
    store.put(session("y"))  # evicts `x`
    store.put(session("z"))  # evicts `second`
    assert store.find(first.key) is None

    viewed = session("q", view=".matches[0]")
    assert viewed.key != first.key
    store.put(viewed)
    store.put(session("x"))
    store.put(session("y"))  # evicts `viewed`
    assert store.find(viewed.key) is None
    clock.advance(11)
    assert store.find(session("y").key) is None


def test_stats_count_hits_misses_and_bytes(backend: Backend) -> None:
    store = backend.make(max_sessions=5)
    a, b = session("a", 20), session("b", 30)
    cost = backend.cost(a) + backend.cost(b)
    store.put(a)
    store.put(b)
    store.get(a.id)
    store.find(b.key)
    store.get("no-such-id")
    store.find("no-such-key")
    stats = store.stats()
    assert stats.to_dict() == {
        "sessions": 2,
        "bytes": cost,
        "max_sessions": 5,
        "max_bytes": stats.max_bytes,
        "hits": 2,
        "misses": 2,
        "evictions": 0,
        "expirations": 0,
    }


def test_concurrent_writers_never_exceed_the_cap(backend: Backend) -> None:
    """Eight threads (for Redis: four replicas, two threads each) putting and reading at once:
    the count cap holds at every moment we look, and every live session reads back intact."""
    replicas = [backend.make(max_sessions=7) for _ in range(4 if backend.name == "redis" else 1)]
    errors: list[BaseException] = []
    peaks: list[int] = []

    def worker(store: SessionStore, tag: int) -> None:
        try:
            for i in range(25):
                s = session(f"w{tag}-{i}", 5)
                store.put(s)
                got = store.get(s.id)
                assert got is None or got == s
                peaks.append(store.stats().sessions)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(replicas[t % len(replicas)], t)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert max(peaks) <= 7
    assert replicas[0].stats().sessions == 7
