"""Typed refusals of a cursor.

One class per reason so the server can map each precisely (and tests can assert the reason)
without parsing messages. The reader of a message is usually an agent, so every message says
what to do next: in almost every case that is "run the search again without a cursor".

Every exception the package raises on purpose is defined here::

    CursorError                    (ValueError) base: the server answers JSON-RPC -32602
    ├── CursorMalformedError       not a cursor this server issued
    ├── CursorSignatureError       sealed with another secret key
    ├── CursorExpiredError         older than sessions.cursor_max_age_s
    ├── CursorParamsMismatchError  a re-sent parameter differs from the cursor's search
    ├── CursorTooLargeError        the search is too big for a cursor
    └── CursorGenerationError      the results behind the cursor changed
    SessionStoreUnavailableError   (RuntimeError) the shared backend (Redis) did not answer:
                                   a retryable isError, the cursor stays valid
"""

from __future__ import annotations

RESTART_HINT = "Run the same search again without a cursor to get a fresh first page."


class CursorError(ValueError):
    """Base of every cursor refusal. A ValueError: the caller sent a bad argument."""


class CursorMalformedError(CursorError):
    """Not a cursor this server issued: truncated, edited, re-encoded or of another kind."""

    def __init__(self, detail: str = "") -> None:
        reason = f" ({detail})" if detail else ""
        super().__init__(
            f"Invalid cursor{reason}: it was changed, truncated or not issued by this server. "
            "Pass next_cursor back exactly as it was returned, or run the search again without a cursor."
        )


class CursorSignatureError(CursorError):
    """Well formed and ours in shape, but sealed with a different secret key.

    Happens when the server's key changed (key file deleted, another replica without a shared
    `secret_key`). Distinguished from tampering by the key fingerprint the cursor carries in clear.
    """

    def __init__(self) -> None:
        super().__init__(
            "This cursor was sealed with a different server key (the key was rotated, or it "
            "comes from another server that does not share sessions.secret_key). " + RESTART_HINT
        )


class CursorExpiredError(CursorError):
    """Authentic but older than the cursor max age."""

    def __init__(self, age_s: float, max_age_s: float) -> None:
        self.age_s = age_s
        self.max_age_s = max_age_s
        when = "is dated in the future" if age_s < 0 else f"is {age_s:.0f} s old"
        super().__init__(f"This cursor has expired: it {when}, cursors are valid for {max_age_s:.0f} s. {RESTART_HINT}")


class CursorParamsMismatchError(CursorError):
    """The caller re-sent a search parameter that differs from the search the cursor pages.

    Names the parameter as the caller spelt it, but not the cursor's value: a cursor's
    contents are sealed, and a refusal must not read them out to whoever holds it."""

    def __init__(self, parameter: str) -> None:
        self.parameter = parameter
        super().__init__(
            f"`{parameter}` sent with this cursor differs from the search that produced it. "
            "Either send only the cursor (it remembers the search; page_size and the presentation "
            "options may change), or drop the cursor to start the new search from its first page."
        )


class CursorTooLargeError(CursorError):
    """The search is too big for a cursor to carry (its parameters are what a cursor holds)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            f"This search is too large to page: its parameters take {size:,} bytes and a cursor "
            f"carries at most {limit:,}. Shorten the query, path, globs or jq_filter, or split the "
            "search into smaller ones."
        )


class CursorGenerationError(CursorError):
    """The results behind the cursor changed (index generation or the files themselves)."""

    def __init__(self, detail: str) -> None:
        super().__init__(
            f"The results behind this cursor have changed ({detail}), so continuing could skip or "
            f"repeat results. Restart the search without a cursor; results may have shifted."
        )


class SessionStoreUnavailableError(RuntimeError):
    """The shared session backend (Redis) did not answer.

    Not a cursor refusal: the call was fine and will work again once the backend is back (the
    store reconnects by itself), so the server reports it as a retryable tool error."""
