"""What only the Redis backend has to prove (the shared contract is in
test_session_store_contract.py): keys namespaced and compact, expiry done by Redis itself,
replicas staying coherent despite their local caches, damaged blobs, and Redis going away and
coming back. Real redis-server throughout."""

from __future__ import annotations

import logging
import time
import zlib
from collections.abc import Callable
from dataclasses import replace

import pytest

from harness.redis_server import RedisServer
from search_engine.models import SearchResult
from sessions import Session, redacted
from sessions.errors import SessionStoreUnavailableError
from sessions.redis_store import RedisStore, encode_session
from tests.session_fakes import FakeClock, make_matches, request_for


def session(query: str = "needle", n: int = 10) -> Session:
    matches = make_matches(n, query)
    return Session.create(request_for(query), SearchResult(matches, len(matches)))


def wait_until(condition: Callable[[], bool], timeout_s: float) -> None:
    """Poll `condition` until it holds; `timeout_s` is a bound on a stall, not a timing."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "Redis did not expire the namespace"
        time.sleep(0.01)


def same(got: Session | None, expected: Session) -> bool:
    """Equal but for last_access, which every read sets."""
    return got is not None and replace(got, last_access=0) == replace(expected, last_access=0)


def test_keys_are_namespaced_compact_and_expire_in_redis(redis_server, raw, namespace) -> None:
    with RedisStore(redis_server.url, namespace=namespace, ttl_s=30) as store:
        s = session(n=2000)
        assert store.put(s)
        keys = {k.decode() for k in raw.keys("*") if namespace in k.decode()}
        assert all(k.startswith(f"codepager:{namespace}:") for k in keys)
        blob = raw.get(f"codepager:{namespace}:s:{s.id}")
        assert blob is not None and len(blob) * 5 < s.size  # msgpack + zlib: compact
        assert 29_000 < raw.pttl(f"codepager:{namespace}:s:{s.id}") <= 30_000
        store.get(s.id)
        # Every piece of bookkeeping carries the TTL too, except the counters.
        keys = {k.decode() for k in raw.keys(f"codepager:{namespace}:*")}
        assert {k for k in keys if raw.pttl(k) == -1} == {f"codepager:{namespace}:stats"}
        assert len(keys) == 9  # blob, lru, atime, size, keyof, index, bytes, seq, stats


def test_expiry_follows_the_store_clock_and_an_access_slides_it(redis_server, raw, namespace) -> None:
    """The store decides expiry by its injected clock: an access slides the TTL, an idle session
    past it is gone (its blob deleted, the expiration counted), with no wait on Redis."""
    clock = FakeClock()
    with RedisStore(redis_server.url, namespace=namespace, ttl_s=1.0, clock=clock) as store:
        s = session()
        store.put(s)
        blob_key = f"codepager:{namespace}:s:{s.id}"
        clock.advance(0.6)
        assert same(store.get(s.id), s)
        clock.advance(0.6)  # 1.2 s after the put, 0.6 s after the access: still live
        assert same(store.get(s.id), s)
        clock.advance(1.1)
        assert store.get(s.id) is None
        assert raw.exists(blob_key) == 0
        assert store.stats().expirations == 1


def test_redis_itself_slides_and_applies_the_ttl(redis_server, raw, namespace) -> None:
    """Redis's own expiry is the safety net under the store's clock: every access re-arms the
    blob's PX, and an idle namespace disappears from Redis without any call from us, even while
    the store's clock (frozen here) still counts the session as live."""
    clock = FakeClock()
    with RedisStore(redis_server.url, namespace=namespace, ttl_s=30, clock=clock) as store:
        s = session()
        store.put(s)
        blob_key = f"codepager:{namespace}:s:{s.id}"
        raw.pexpire(blob_key, 500)  # what 29.5 s of idle time leave of Redis's expiry
        assert raw.pttl(blob_key) < 600
        assert same(store.get(s.id), s)
        assert raw.pttl(blob_key) > 29_000  # re-armed by the access
    with RedisStore(redis_server.url, namespace=namespace, ttl_s=0.05, clock=clock) as store:
        store.put(s)  # every key of the namespace now expires 50 ms after this, in Redis's time

        def namespace_left() -> list[bytes]:
            return [k for k in raw.keys(f"codepager:{namespace}:*") if not k.endswith(b":stats")]

        wait_until(lambda: namespace_left() == [], timeout_s=30)
        assert raw.exists(blob_key) == 0  # Redis dropped it without any call from us
        assert store.get(s.id) is None


def test_replicas_share_sessions_and_local_copies_never_outlive_redis(redis_server, namespace) -> None:
    with (
        RedisStore(redis_server.url, namespace=namespace, max_sessions=2) as a,
        RedisStore(redis_server.url, namespace=namespace, max_sessions=2) as b,
    ):
        s = session("shared", 50)
        a.put(s)
        assert same(b.get(s.id), s) and same(b.find(s.key), s)
        assert a.get(s.id) is s  # served from a's decoded copy once Redis confirms it is live
        b.put(session("x"))
        b.get(s.id)  # s is now more recent than x
        b.put(session("y"))  # evicts x, not s
        assert same(a.get(s.id), s)
        b.put(session("z"))  # evicts y
        b.put(session("w"))  # evicts s
        assert a.get(s.id) is None and a.find(s.key) is None  # a's local copy does not resurrect it


#: A session whose one unknown field is an array nested 200,000 deep: msgpack refused it (a
#: ValueError), msgspec skips an unknown field by recursing (a RecursionError, caught).
_DEEP = b"\x01" + zlib.compress(b"\x81\xa3zzz" + b"\x91" * 200_000 + b"\x90")


@pytest.mark.parametrize("blob", [b"\x07garbage", b"\x01garbage", b"", _DEEP], ids=["format", "zlib", "empty", "deep"])
def test_an_unreadable_blob_is_a_miss_and_is_dropped(redis_server, raw, namespace, caplog, blob: bytes) -> None:
    with (
        RedisStore(redis_server.url, namespace=namespace) as writer,
        RedisStore(redis_server.url, namespace=namespace) as reader,
    ):
        s = session()
        writer.put(s)
        raw.set(f"codepager:{namespace}:s:{s.id}", blob, keepttl=True)
        with caplog.at_level(logging.WARNING, logger="sessions.redis_store"):
            assert reader.get(s.id) is None
        assert "unreadable session" in caplog.text
        assert reader.stats().sessions == 0


def test_refuses_bad_configuration(redis_server) -> None:
    with pytest.raises(ValueError, match="namespace"):
        RedisStore(redis_server.url, namespace="has space")
    with pytest.raises(ValueError, match="positive"):
        RedisStore(redis_server.url, max_sessions=0)
    with pytest.raises(ValueError, match="Redis URL"):
        RedisStore("http://127.0.0.1:1/0")
    assert redacted("redis://user:hunter2@db:6379/1") == "redis://user:***@db:6379/1"


def test_redis_down_is_a_clear_error_and_recovers_when_it_returns(tmp_path, namespace) -> None:
    server = RedisServer(tmp_path / "redis").start()
    try:
        store = RedisStore(server.url, namespace=namespace, socket_timeout_s=1.0)
        s = session()
        store.put(s)
        server.stop()
        for call in (lambda: store.get(s.id), lambda: store.put(session("b")), store.stats):
            with pytest.raises(SessionStoreUnavailableError, match=f"session store unavailable: Redis at {server.url}"):
                call()
        server.start()  # same port, empty (no persistence): the old session is gone, the store works
        assert store.get(s.id) is None
        assert store.put(s) and same(store.get(s.id), s)
        store.close()
    finally:
        server.stop()


def test_blob_size_is_what_the_budget_counts(redis_server, namespace) -> None:
    with RedisStore(redis_server.url, namespace=namespace) as store:
        s = session(n=300)
        expected = len(encode_session(s))
        store.put(s)
        assert store.stats().bytes == expected
