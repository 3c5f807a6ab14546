"""For tests of how many queries, jq workers or rg processes run at once (`infra.slots`):
a count of the real resource open at once, and a clock telling when every call has started."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from infra import Slots

T = TypeVar("T")

#: How long a test waits for its calls to reach a point before failing instead of hanging.
GUARD_S = 60.0


class Overlap:
    """`calls` concurrent calls, each opening one resource (a connection, a worker) under a cap
    of `cap`: how many are open now (`now`) and the most at once (`most`).

    It is also the calls' clock (`time.monotonic`), noting which threads have read it: a call
    bounded by slots reads its clock as it starts, before it waits for one. A resource that
    `hold`s before it is given back stays open until every call has started (so each either
    has its slot or waits for one) and `cap` resources were open at once: every resource that
    can be open together is."""

    def __init__(self, calls: int, cap: int) -> None:
        self.calls, self.cap = calls, cap
        self.now = self.most = 0
        self._threads: set[int] = set()
        self._changed = threading.Condition()

    def __call__(self) -> float:
        with self._changed:
            self._threads.add(threading.get_ident())
            self._changed.notify_all()
        return time.monotonic()

    def opened(self) -> None:
        with self._changed:
            self.now += 1
            self.most = max(self.most, self.now)
            self._changed.notify_all()

    def closed(self) -> None:
        with self._changed:
            self.now -= 1

    def hold(self) -> None:
        with self._changed:
            ready = self._changed.wait_for(
                lambda: len(self._threads) >= self.calls and self.most >= min(self.cap, self.calls), GUARD_S
            )
            assert ready, (
                f"{len(self._threads)} of {self.calls} calls started, at most {self.most} open, in {GUARD_S} s"
            )


class SteppedClock:
    """A clock that moves on `step` seconds each time it is read: a call waiting for a slot
    finds its deadline passed at its first look once `step` exceeds its time limit, with no
    real waiting."""

    def __init__(self) -> None:
        self.now = self.step = 0.0

    def __call__(self) -> float:
        self.now += self.step
        return self.now


@contextlib.contextmanager
def all_slots_taken(monkeypatch: pytest.MonkeyPatch, step: float) -> Iterator[tuple[Slots, Overlap]]:
    """One slot on a `SteppedClock`, held as a running call holds it, the clock moving `step`
    seconds at each look while it is; the `Overlap` counts the processes started meanwhile."""
    overlap = Overlap(1, 1)
    counted_popens(monkeypatch, overlap, hold=False)
    clock = SteppedClock()
    slots = Slots(1, clock)
    with slots.hold(float("inf"), AssertionError):
        clock.step = step
        yield slots, overlap
        clock.step = 0.0


def run_at_once(calls: int, call: Callable[[int], T]) -> dict[int, T]:
    """`call(k)` for k in range(calls), each in a thread of its own, all started before any is
    joined: what each returned, by k."""
    results: dict[int, T] = {}

    def run(k: int) -> None:
        results[k] = call(k)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def counted_popens(monkeypatch: pytest.MonkeyPatch, overlap: Overlap, *, hold: bool) -> None:
    """Real subprocesses (jq workers, rg), counted from their start until reaped; with `hold`,
    each waits after starting until every call of the test has started and as many processes
    as may be were running at once, so each runs while every other that can run is."""

    class CountedPopen(subprocess.Popen[bytes]):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.counted = True
            overlap.opened()
            if hold:
                overlap.hold()

        def wait(self, timeout: float | None = None) -> int:
            code = super().wait(timeout)
            if self.counted:
                self.counted = False
                overlap.closed()
            return code

    monkeypatch.setattr(subprocess, "Popen", CountedPopen)
