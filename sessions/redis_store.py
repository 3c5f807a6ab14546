"""`RedisStore`: the session store replicas share, so any of them can serve any cursor's page.

Same contract as `MemoryStore` (sliding TTL, LRU eviction under a session-count cap and a
memory budget, a dedup index by `Session.key`), kept in Redis under `codepager:<namespace>:`.

Why this shape:
- Every operation is one Lua script, so the bookkeeping (sizes, LRU order, dedup index, counters)
  changes atomically even with many replicas writing at once. Keys are derived inside the
  script from the prefix, which is fine for a standalone Redis (not Redis Cluster).
- Two sorted sets: `lru` orders by an access *sequence number* (so LRU order never depends on
  replicas' clocks agreeing, or on two accesses falling in the same clock tick), `atime` holds
  last-access times for expiry. Expiry is decided against the store's clock like MemoryStore's
  TTL, and each session blob also carries a Redis expiry (`PX`, re-armed on every access), so
  Redis hands the memory back by itself when every server is gone.
- The memory budget counts what Redis actually holds: the compressed blob (msgpack + zlib,
  typically ~10x smaller than the in-process `Session.size`).
- A blob is read back as untrusted: whoever can write to Redis (or a bug) can replace it. It
  is inflated no further than `max_session_bytes`, which `put` enforces on what it stores, so
  a blob that inflates further (1 MB of compressed zeros is 1 GB) is unreadable at the cap,
  never inflated whole; and it is decoded as the types written (`Session.from_bytes`), so a
  value of another type makes it unreadable too, instead of failing or misleading a page
  later. An unreadable blob is a miss and is deleted: the pager restores the page by searching
  again from the cursor.
- Decoding a large session costs milliseconds per thousand matches, and a page walk reads the
  same session over and over. Sessions never change once stored (ids are fresh uuids), so
  each process keeps a small LRU of decoded sessions and asks the script only to confirm
  liveness (and slide the TTL) when it already has the session: the blob is then not sent.
- Redis being down is an operational fault, not a bad request: every Redis failure becomes
  `SessionStoreUnavailableError` with an actionable message. redis-py reconnects on the next
  command, so paging recovers by itself once Redis is back.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import redis
from cachetools import LRUCache
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from sessions.errors import SessionStoreUnavailableError
from sessions.memory import DEFAULT_MAX_BYTES, DEFAULT_MAX_SESSIONS, DEFAULT_TTL_S
from sessions.models import Session
from sessions.store import DEFAULT_NAMESPACE, StoreStats, redacted

log = logging.getLogger(__name__)

DEFAULT_LOCAL_CACHE_BYTES = 64 * 1024 * 1024
#: The longest a session's encoding (msgpack, before compression) may be, by default: the
#: largest session the in-process store keeps by default (its whole budget, `Session.size`).
DEFAULT_MAX_SESSION_BYTES = DEFAULT_MAX_BYTES
_NAMESPACE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_FORMAT = b"\x01"  # first byte of every blob: the encoding version
_ZLIB_LEVEL = 1  # ~10x on result lists, and ~6x faster than the default level

# ARGV: op, prefix, now, ttl_s, ttl_ms, then per op (see RedisStore._call).
_SCRIPT = """
local op, P = ARGV[1], ARGV[2]
local now, ttl, ttl_ms = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local LRU, ATIME, SIZE, KEYOF, INDEX = P..'lru', P..'atime', P..'size', P..'keyof', P..'index'
local BYTES, SEQ, STATS = P..'bytes', P..'seq', P..'stats'

local function drop(id)
  local size = tonumber(redis.call('HGET', SIZE, id) or 0)
  local key = redis.call('HGET', KEYOF, id)
  redis.call('DEL', P..'s:'..id)
  redis.call('ZREM', LRU, id)
  redis.call('ZREM', ATIME, id)
  redis.call('HDEL', SIZE, id)
  redis.call('HDEL', KEYOF, id)
  -- a newer session with the same key may have taken the slot: only drop our own entry
  if key and redis.call('HGET', INDEX, key) == id then redis.call('HDEL', INDEX, key) end
  if size > 0 then redis.call('DECRBY', BYTES, size) end
end

local function keepalive()
  -- the bookkeeping lives as long as the newest blob: an idle namespace vanishes entirely
  for _, k in ipairs({LRU, ATIME, SIZE, KEYOF, INDEX, BYTES, SEQ}) do redis.call('PEXPIRE', k, ttl_ms) end
end

local function expire_all()
  local stale = redis.call('ZRANGEBYSCORE', ATIME, '-inf', now - ttl)
  for _, id in ipairs(stale) do drop(id) end
  if #stale > 0 then redis.call('HINCRBY', STATS, 'expirations', #stale) end
end

-- true if `id` is live (and then refreshed: TTL slides, most recently used)
local function access(id)
  local atime = redis.call('ZSCORE', ATIME, id)
  if not atime then return false end
  if tonumber(atime) <= now - ttl or redis.call('PEXPIRE', P..'s:'..id, ttl_ms) == 0 then
    drop(id)
    redis.call('HINCRBY', STATS, 'expirations', 1)
    return false
  end
  redis.call('ZADD', ATIME, 'GT', now, id)
  redis.call('ZADD', LRU, redis.call('INCR', SEQ), id)
  keepalive()
  return true
end

-- {id} when the caller already holds it (hint), {id, blob} otherwise, nil when gone
local function serve(id, hint)
  if not id or not access(id) then
    redis.call('HINCRBY', STATS, 'misses', 1)
    return false
  end
  redis.call('HINCRBY', STATS, 'hits', 1)
  if id == hint then return {id} end
  return {id, redis.call('GET', P..'s:'..id)}
end

if op == 'get' then return serve(ARGV[6], ARGV[7]) end
if op == 'find' then return serve(redis.call('HGET', INDEX, ARGV[6]), ARGV[7]) end
if op == 'delete' then
  if not access(ARGV[6]) then return 0 end
  drop(ARGV[6])
  return 1
end
if op == 'put' then
  local id, key, size = ARGV[6], ARGV[7], tonumber(ARGV[8])
  local max_sessions, max_bytes = tonumber(ARGV[9]), tonumber(ARGV[10])
  expire_all()
  if redis.call('ZSCORE', LRU, id) then drop(id) end
  local evicted = 0
  while redis.call('ZCARD', LRU) > 0 and (redis.call('ZCARD', LRU) >= max_sessions
      or tonumber(redis.call('GET', BYTES) or 0) + size > max_bytes) do
    drop(redis.call('ZRANGE', LRU, 0, 0)[1])
    evicted = evicted + 1
  end
  if evicted > 0 then redis.call('HINCRBY', STATS, 'evictions', evicted) end
  redis.call('SET', P..'s:'..id, ARGV[11], 'PX', ttl_ms)
  redis.call('ZADD', ATIME, now, id)
  redis.call('ZADD', LRU, redis.call('INCR', SEQ), id)
  redis.call('HSET', SIZE, id, size)
  redis.call('HSET', KEYOF, id, key)
  redis.call('HSET', INDEX, key, id)
  redis.call('INCRBY', BYTES, size)
  keepalive()
  return 1
end
if op == 'stats' then
  expire_all()
  local counters = redis.call('HMGET', STATS, 'hits', 'misses', 'evictions', 'expirations')
  return {redis.call('ZCARD', LRU), redis.call('GET', BYTES) or 0,
          counters[1] or 0, counters[2] or 0, counters[3] or 0, counters[4] or 0}
end
return redis.error_reply('codepager session script: unknown op ' .. tostring(op))
"""
#: The `StoreStats` fields the script's `stats` op returns, in its order (the others are this
#: replica's configuration).
_SCRIPT_STATS = ("sessions", "bytes", "hits", "misses", "evictions", "expirations")


def encode_session(session: Session) -> bytes:
    """The bytes kept in Redis for `session` (their length is what the memory budget counts)."""
    return _framed(session.to_bytes())


def _framed(packed: bytes) -> bytes:
    return _FORMAT + zlib.compress(packed, _ZLIB_LEVEL)


def decode_session(blob: bytes, max_size: int = DEFAULT_MAX_SESSION_BYTES) -> Session:
    """The session `blob` holds; ValueError (or zlib.error) if it is not one `encode_session`
    wrote for a session of at most `max_size` bytes encoded: inflating stops one byte past
    that, so a blob costs about `max_size` at most whatever it claims (twice that, briefly,
    while zlib joins its output)."""
    if not blob.startswith(_FORMAT):
        raise ValueError(f"unknown session encoding {blob[:1]!r}")
    inflater = zlib.decompressobj()
    packed = inflater.decompress(memoryview(blob)[1:], max_size + 1)
    if len(packed) > max_size:
        raise ValueError(f"it inflates past {max_size} bytes, the most a session may be")
    if not inflater.eof or inflater.unused_data:
        raise ValueError("its compressed stream is cut short or followed by other bytes")
    return Session.from_bytes(packed)


class _LocalCache(LRUCache[str, Session]):
    """Decoded sessions this process already holds, with a by-key index kept exact on eviction."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(maxsize=max_bytes, getsizeof=lambda s: s.size)
        self.by_key: dict[str, str] = {}

    def popitem(self) -> tuple[str, Session]:
        session_id, session = super().popitem()
        self.forget(session)
        return session_id, session

    def add(self, session: Session) -> None:
        if session.size <= self.maxsize:
            self[session.id] = session
            self.by_key[session.key] = session.id

    def remove(self, session_id: str) -> None:
        session = self.pop(session_id, None)
        if session is not None:
            self.forget(session)

    def forget(self, session: Session) -> None:
        if self.by_key.get(session.key) == session.id:
            del self.by_key[session.key]


class RedisStore:
    """`SessionStore` in Redis, shared by every server using the same URL and namespace.

    `clock` (wall-clock seconds, shared meaning across hosts) drives expiry decisions and is
    injectable for tests; counters in `stats()` are shared by all replicas of the namespace.
    `local_cache_bytes` bounds this process's cache of decoded sessions (in `Session.size`
    units, like MemoryStore's budget). `max_session_bytes` is the longest one session may be
    encoded (msgpack, before compression): `put` keeps nothing longer, and a read inflates a
    blob no further (the server passes its session budget, as MemoryStore keeps no session
    larger than its budget).
    """

    def __init__(
        self,
        url: str,
        namespace: str = DEFAULT_NAMESPACE,
        ttl_s: float = DEFAULT_TTL_S,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        clock: Callable[[], float] = time.time,
        local_cache_bytes: int = DEFAULT_LOCAL_CACHE_BYTES,
        socket_timeout_s: float = 5.0,
        max_session_bytes: int = DEFAULT_MAX_SESSION_BYTES,
    ) -> None:
        if ttl_s <= 0 or max_sessions < 1 or max_bytes < 1 or local_cache_bytes < 1 or max_session_bytes < 1:
            raise ValueError(
                f"session store limits must be positive (ttl_s={ttl_s}, max_sessions={max_sessions}, "
                f"max_bytes={max_bytes}, local_cache_bytes={local_cache_bytes}, "
                f"max_session_bytes={max_session_bytes})"
            )
        if not _NAMESPACE.fullmatch(namespace):
            raise ValueError(f"sessions.namespace must be 1-64 of [A-Za-z0-9_.-], got {namespace!r}")
        self.url = redacted(url)
        try:
            self._redis = redis.Redis.from_url(
                url,
                socket_connect_timeout=min(2.0, socket_timeout_s),
                socket_timeout=socket_timeout_s,
                # A couple of quick retries ride out a reconnect; more would only delay the error.
                retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), retries=2),
                health_check_interval=30,
            )
        except ValueError as exc:
            raise ValueError(f"sessions.backend is not a usable Redis URL ({self.url}): {exc}") from None
        self._script = self._redis.register_script(_SCRIPT)
        self.prefix = f"codepager:{namespace}:"
        self.ttl_s = ttl_s
        self.max_sessions = max_sessions
        self.max_bytes = max_bytes
        self.max_session_bytes = max_session_bytes
        self._clock = clock
        self._lock = threading.Lock()
        self._local = _LocalCache(local_cache_bytes)

    # -- SessionStore -------------------------------------------------------------------

    def get(self, session_id: str) -> Session | None:
        with self._lock:
            hint = session_id if session_id in self._local else ""
        return self._served(self._call("get", session_id, hint), hint)

    def find(self, key: str) -> Session | None:
        with self._lock:
            hint = self._local.by_key.get(key, "")
        return self._served(self._call("find", key, hint), hint)

    def put(self, session: Session) -> bool:
        packed = session.to_bytes()
        if len(packed) > self.max_session_bytes:  # no reader would inflate it (decode_session)
            return False
        blob = _framed(packed)
        if len(blob) > self.max_bytes:
            return False
        self._call("put", session.id, session.key, len(blob), self.max_sessions, self.max_bytes, blob)
        with self._lock:
            self._local.add(session)
        return True

    def stats(self) -> StoreStats:
        kept = dict(zip(_SCRIPT_STATS, (int(v) for v in self._call("stats")), strict=True))
        return StoreStats(max_sessions=self.max_sessions, max_bytes=self.max_bytes, **kept)

    def ping(self) -> None:
        """Raise SessionStoreUnavailableError unless Redis answers (used at start-up)."""
        with self._reachable():
            self._redis.ping()

    def close(self) -> None:
        self._redis.close()

    def __enter__(self) -> RedisStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------

    def _call(self, op: str, *args: Any) -> Any:
        now = self._clock()
        with self._reachable():
            return self._script(args=[op, self.prefix, repr(now), repr(self.ttl_s), _ms(self.ttl_s), *args])

    @contextmanager
    def _reachable(self) -> Iterator[None]:
        try:
            yield
        except redis.RedisError as exc:
            raise SessionStoreUnavailableError(
                f"session store unavailable: Redis at {self.url} failed ({type(exc).__name__}: {exc}). "
                "Retry in a few seconds: the server reconnects by itself. If it persists, check that "
                "Redis is running and reachable at sessions.backend."
            ) from exc

    def _served(self, reply: list[bytes] | None, hint: str) -> Session | None:
        """The session a get/find script reply stands for; drops the hinted local copy if gone."""
        if reply is None:
            if hint:
                self._forget(hint)
            return None
        session_id = reply[0].decode()
        if len(reply) == 1:
            with self._lock:
                session = self._local.get(session_id)
            if session is None:  # evicted locally between the hint and now: fetch it
                return self._served(self._call("get", session_id, ""), "")
        else:
            try:
                session = decode_session(reply[1], self.max_session_bytes)
                if session.id != session_id:
                    raise ValueError("it holds another session")  # its id is not echoed: any text
            except (ValueError, zlib.error) as exc:
                # Written by an incompatible version, damaged, or not by us: unusable, so gone.
                log.warning("dropping unreadable session %s from %s: %s", session_id, self.url, exc)
                self._call("delete", session_id)
                return None
            with self._lock:
                self._local.add(session)
        session.last_access = self._clock()
        return session

    def _forget(self, session_id: str) -> None:
        with self._lock:
            self._local.remove(session_id)


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))
