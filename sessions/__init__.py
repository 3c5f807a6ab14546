"""Remembering things: the store of full result lists, sealed cursors and paging.
Knows nothing of MCP.

This module is the package's public API: `server` imports only the names in `__all__`, from
here, never a submodule. The Redis store (`RedisStore`) is imported on first use: the redis
client costs ~0.2 s to import, which a memory-backed server or a CLI command never needs, and
it is an extra (`pip install "codepager[redis]"`) a default install leaves out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra import lazy_exports
from sessions.cursor import DEFAULT_MAX_AGE_S, CursorCodec, CursorState
from sessions.errors import (
    CursorError,
    CursorExpiredError,
    CursorGenerationError,
    CursorMalformedError,
    CursorParamsMismatchError,
    CursorSignatureError,
    CursorTooLargeError,
    SessionStoreUnavailableError,
)
from sessions.keys import CACHE_DIR_ENTRIES, CURSOR_KEY_FILE, load_or_create_key
from sessions.memory import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SWEEP_INTERVAL_S,
    DEFAULT_TTL_S,
    MemoryStore,
)
from sessions.models import Page, Session
from sessions.pager import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, Pager
from sessions.store import DEFAULT_NAMESPACE, SessionStore, StoreStats, redacted

if TYPE_CHECKING:
    from sessions.redis_store import RedisStore

__all__ = [
    "CACHE_DIR_ENTRIES",
    "CURSOR_KEY_FILE",
    "DEFAULT_MAX_AGE_S",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_NAMESPACE",
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_SWEEP_INTERVAL_S",
    "DEFAULT_TTL_S",
    "MAX_PAGE_SIZE",
    "CursorCodec",
    "CursorError",
    "CursorExpiredError",
    "CursorGenerationError",
    "CursorMalformedError",
    "CursorParamsMismatchError",
    "CursorSignatureError",
    "CursorState",
    "CursorTooLargeError",
    "MemoryStore",
    "Page",
    "Pager",
    "RedisStore",
    "Session",
    "SessionStore",
    "SessionStoreUnavailableError",
    "StoreStats",
    "load_or_create_key",
    "redacted",
]


# The names imported on first use (see the module doc).
__getattr__ = lazy_exports(__name__, {"RedisStore": "sessions.redis_store"})
