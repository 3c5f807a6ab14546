"""How many of one kind of costly work run at once: `Slots`.

Each ripgrep run, SQL query (`analyze-with-duckdb`) and `jq_filter` worker has a memory limit
of its own, but calls arrive concurrently: 8 queries took the server from 593 MB to 3,730 MB,
and 8 regex searches whose rg each read `/dev/zero` as an ignore file 5.7-7.1 GB; only anyio's
40 worker threads stood between one client and 40 times a call's limit. So each kind of work
holds one of a fixed number of slots while it runs (the constants
`DEFAULT_RG_MAX_CONCURRENT`, `MAX_QUERIES`, `MAX_WORKERS`), and the worst case is that
number times the per-call limit. It lives in the engine, the lowest layer, because ripgrep
runs there and the server's SQL and jq share it.

A call over the cap waits for a slot in its worker thread, and the wait counts against its own
time limit: the caller gives the deadline it has anyway, and a call still waiting at it fails
with the error the caller builds (its own timeout error, saying the server was busy), as does
one whose slot came with no time left to use it. A call is never dropped and never waits past
its deadline. A slot is given back only by the call that took it, when its block ends however
it ends; a call that stops waiting (deadline or exception) gave nothing back, as it took
nothing.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator


class Slots:
    """At most `size` holders at once, across every thread sharing this object (the server
    builds one per kind of work). `clock` is in seconds and says when deadlines pass."""

    def __init__(self, size: int, clock: Callable[[], float] = time.monotonic) -> None:
        if size < 1:
            raise ValueError(f"Slots needs at least one slot (got {size})")
        self.size = size
        self.clock = clock
        self._free = size
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def hold(self, deadline: float, busy: Callable[[], BaseException]) -> Iterator[None]:
        """One slot until the block ends. Without a free one, waits until one is given back or
        `deadline` (by `clock`) passes, then raises `busy()`; a slot had at the deadline or after
        it, with no time left to use it, is given back and the call fails the same way."""
        with self._changed:
            while not self._free:
                remaining = deadline - self.clock()
                if remaining <= 0:
                    raise busy()
                self._changed.wait(remaining)
            self._free -= 1
        try:
            if self.clock() >= deadline:
                raise busy()
            yield
        finally:
            with self._changed:
                self._free += 1
                self._changed.notify()
