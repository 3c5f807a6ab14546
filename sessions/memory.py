"""The default, in-process session store: cachetools TTLCache plus a session-count cap.

Why this shape:
- TTLCache gives LRU order and per-item expiry; re-inserting on every read turns its fixed TTL
  into a *sliding* one (expiry counts from last access, as an agent paging slowly expects).
- Its `maxsize` is spent on the memory budget (bytes, via `Session.size`), so the session-count
  cap is enforced by evicting LRU entries before an insert. Either limit evicts LRU first.
- TTLCache only expires lazily, on access. A `Sweeper` thread calls `expire()` every
  `sweep_interval_s` so a server that goes idle still hands the memory back.
- One `threading.Lock` guards everything. Critical sections are short dictionary work, never
  I/O or searching, so holding it from an asyncio task (directly or via `to_thread`) is safe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Literal

from cachetools import TTLCache

from infra import Sweeper
from sessions.models import Session
from sessions.store import StoreStats

DEFAULT_TTL_S = 300.0
DEFAULT_MAX_SESSIONS = 100
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
DEFAULT_SWEEP_INTERVAL_S = 60.0

RemovalReason = Literal["evicted", "expired"]


class _SessionCache(TTLCache[str, Session]):
    """TTLCache that also caps the number of items and reports every removal it decides on.

    Overriding `popitem` (eviction) and `expire` is the extension point cachetools documents
    for observing removals; the store uses it to keep its dedup index and counters exact.
    """

    def __init__(
        self,
        max_sessions: int,
        max_bytes: int,
        ttl_s: float,
        clock: Callable[[], float],
        on_remove: Callable[[Session, RemovalReason], None],
    ) -> None:
        super().__init__(maxsize=max_bytes, ttl=ttl_s, timer=clock, getsizeof=lambda s: s.size)
        self.max_sessions = max_sessions
        self._on_remove = on_remove

    def __setitem__(self, key: str, value: Session) -> None:
        if key not in self:
            while len(self) >= self.max_sessions:
                self.popitem()
        super().__setitem__(key, value)

    def popitem(self) -> tuple[str, Session]:
        key, session = super().popitem()
        self._on_remove(session, "evicted")
        return key, session

    def expire(self, time: float | None = None) -> list[tuple[str, Session]]:
        expired = super().expire(time)
        for _, session in expired:
            self._on_remove(session, "expired")
        return expired


class MemoryStore:
    """`SessionStore` held in this process. Thread-safe; see the module docstring for design.

    `clock` (monotonic seconds) drives expiry and is injectable for tests. Pass
    `sweep_interval_s=None` to run without the sweeper thread (expiry then happens on access).
    """

    def __init__(
        self,
        ttl_s: float = DEFAULT_TTL_S,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        sweep_interval_s: float | None = DEFAULT_SWEEP_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl_s <= 0 or max_sessions < 1 or max_bytes < 1:
            raise ValueError(
                f"session store limits must be positive (ttl_s={ttl_s}, max_sessions={max_sessions}, "
                f"max_bytes={max_bytes})"
            )
        self._lock = threading.Lock()
        self._cache = _SessionCache(max_sessions, max_bytes, ttl_s, clock, self._removed)
        self._by_key: dict[str, str] = {}
        self._hits = self._misses = self._evictions = self._expirations = 0
        self._sweeper: Sweeper | None = None
        if sweep_interval_s is not None:
            if sweep_interval_s <= 0:
                raise ValueError(f"sweep_interval_s must be positive, got {sweep_interval_s}")
            self._sweeper = Sweeper(self._expire, sweep_interval_s, name="codepager-session-sweeper").start(now=False)

    # -- SessionStore -------------------------------------------------------------------

    def get(self, session_id: str) -> Session | None:
        with self._lock:
            return self._access(session_id)

    def find(self, key: str) -> Session | None:
        with self._lock:
            session_id = self._by_key.get(key)
            if session_id is None:
                self._misses += 1
                return None
            return self._access(session_id)

    def put(self, session: Session) -> bool:
        with self._lock:
            if session.size > self._cache.maxsize:
                return False
            self._cache[session.id] = session
            self._by_key[session.key] = session.id
            return True

    def stats(self) -> StoreStats:
        with self._lock:
            return StoreStats(
                sessions=len(self._cache),
                # cachetools types sizes as float (maxsize may be inf); here they are sums of
                # `Session.size` and the `max_bytes` int given, so int() only changes the type.
                bytes=int(self._cache.currsize),
                max_sessions=self._cache.max_sessions,
                max_bytes=int(self._cache.maxsize),
                hits=self._hits,
                misses=self._misses,
                evictions=self._evictions,
                expirations=self._expirations,
            )

    def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals (caller holds the lock) ----------------------------------------------

    def _access(self, session_id: str) -> Session | None:
        session = self._cache.get(session_id)
        if session is None:
            self._misses += 1
            return None
        self._hits += 1
        self._refresh(session)
        return session

    def _refresh(self, session: Session) -> None:
        """Re-insert: restarts the TTL (sliding expiry) and makes it most recently used."""
        session.last_access = time.time()
        self._cache[session.id] = session

    def _removed(self, session: Session, reason: RemovalReason) -> None:
        if reason == "evicted":
            self._evictions += 1
        else:
            self._expirations += 1
        self._unindex(session)

    def _unindex(self, session: Session) -> None:
        # A newer session with the same key may have taken the slot; only drop our own entry.
        if self._by_key.get(session.key) == session.id:
            del self._by_key[session.key]

    def _expire(self) -> None:
        with self._lock:
            self._cache.expire()
