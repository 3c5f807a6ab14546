"""Remembering things: the store of full result lists, sealed cursors and paging.
Knows nothing of MCP."""

from sessions.cursor import CursorCodec, CursorState
from sessions.errors import (
    CursorError,
    CursorExpiredError,
    CursorGenerationError,
    CursorMalformedError,
    CursorParamsMismatchError,
    CursorSignatureError,
    CursorTooLargeError,
)
from sessions.keys import load_or_create_key
from sessions.memory import MemoryStore
from sessions.models import Page, Session
from sessions.pager import Pager
from sessions.store import SessionStore, StoreStats

__all__ = [
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
    "Session",
    "SessionStore",
    "StoreStats",
    "load_or_create_key",
]
