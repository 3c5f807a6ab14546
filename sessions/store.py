"""The contract every session backend meets: `MemoryStore` in the process, `RedisStore` shared
by replicas.

Kept deliberately small and in terms of whole `Session` values (which round-trip through
`Session.to_bytes`/`from_bytes`), so a backend that lives outside the process implements it
with a handful of key/value commands (`RedisStore`: one Lua script). Reads count as access:
`get` and `find` slide the session's time-to-live, like a cache hit should.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

from sessions.models import Session

#: The Redis key prefix's namespace when none is configured (`codepager:<namespace>:`).
DEFAULT_NAMESPACE = "default"


def redacted(url: str) -> str:
    """A backend URL (`sessions.backend`) without its password, for messages, logs and
    `codepager config`: here, not beside the Redis store, since showing it needs no redis client."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


@dataclass(frozen=True, slots=True)
class StoreStats:
    """A snapshot for `codepager` status output and tests; counters are since start."""

    sessions: int
    bytes: int
    max_sessions: int
    max_bytes: int
    hits: int
    misses: int
    evictions: int
    expirations: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class SessionStore(Protocol):
    def get(self, session_id: str) -> Session | None:
        """The live session with this id (refreshing its TTL), or None if unknown/expired."""

    def find(self, key: str) -> Session | None:
        """The live session whose `Session.key` is `key` (refreshing its TTL), or None."""

    def put(self, session: Session) -> bool:
        """Keep `session`, evicting least recently used ones as needed.

        Returns False, keeping nothing, when the session alone exceeds the memory budget."""

    def stats(self) -> StoreStats: ...

    def close(self) -> None:
        """Release background resources (sweeper thread, connections). Idempotent."""
