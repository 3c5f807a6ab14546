"""One mechanism for everything that expires on a schedule: a periodic sweeper.

Expired sessions, offloaded pages and the proxy's saved datasets are all removed lazily (on
access, or as a side effect of a write), which hands nothing back to a server that goes idle.
Each owner therefore runs a `Sweeper`: it calls the owner's sweep every `interval_s` on a
daemon thread until `close()`, and can also be asked to sweep when one is due (`maybe_sweep`,
timed by the injected clock). A failed sweep is logged and never kills the thread or fails the
caller that triggered it. Sweeps never overlap (one lock), so a sweep started by a write and
one from the thread cannot unlink the same files twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class Sweeper:
    """Calls `sweep` every `interval_s` seconds once started, and whenever `maybe_sweep` finds
    one due by `clock` (monotonic seconds)."""

    def __init__(
        self, sweep: Callable[[], object], interval_s: float, *, name: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if interval_s < 0:
            raise ValueError(f"sweep_interval_s must not be negative, got {interval_s}")
        self.interval_s = interval_s
        self.name = name
        self._sweep = sweep
        self._clock = clock
        self._last = float("-inf")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sweep(self) -> None:
        """Sweep now; a failure is logged, never raised."""
        with self._lock:
            self._last = self._clock()
            try:
                self._sweep()
            except Exception:
                log.exception("%s failed", self.name)

    def maybe_sweep(self) -> None:
        """Sweep if `interval_s` has passed since the last sweep (or none has run yet)."""
        if self._clock() - self._last >= self.interval_s:
            self.sweep()

    def start(self, *, now: bool = True) -> Sweeper:
        """Start the thread (idempotent): a sweep now when `now`, then one every interval. A
        zero interval (sweep on every `maybe_sweep`) has no thread: it would sweep in a loop."""
        if self.interval_s <= 0:
            raise ValueError(f"a sweeper thread needs a positive sweep_interval_s, got {self.interval_s}")
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, args=(now,), name=self.name, daemon=True)
            self._thread.start()
        return self

    def _run(self, now: bool) -> None:
        if now:
            self.sweep()
        while not self._stop.wait(self.interval_s):
            self.sweep()

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def close(self) -> None:
        """Stop the thread and wait for a sweep in progress (idempotent)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()
