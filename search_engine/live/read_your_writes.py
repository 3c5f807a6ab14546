"""Read-your-writes for one root: which state of the files a semantic or hybrid search answers
from, and bringing the index up to it.

The contract (docs/index.md states it for users): a search sees every change to the files
completed before the call began (edits, new files, deletions, renames) with their current
lines, or its answer says it does not. Per call (`LiveRoot.settle`):

1. Find out whether anything changed. With events (`search_engine.live.watcher`), a barrier makes
   sure every change made before the call is recorded (on Linux a read of the inotify queue:
   microseconds); nothing recorded since the last fold means the loaded generation is current
   and the search goes ahead at once (the common case). With polling (no events: a network
   filesystem, the inotify watch limit, the watcher failed, or `index.watch = false`), every
   call asks for a fresh listing and stat of the tree.
2. If something changed, a fold (an incremental update, `search_engine.index.update`: the changed
   files re-chunked and embedded, everything else copied) runs in a background thread, one at
   a time per root. When the changes are at most `live_limit` files (no directory, no
   overflow), the call does not wait: it answers `current` with those paths as `live`, taken
   as they are now by the live layer (`search_engine.live.layer`), and the fold starts
   `FOLD_DELAY_S` later so it does not compete with that search.
3. Otherwise (a checkout of many files, a directory moved in, an ignore file) the call waits
   for the fold up to `wait_s`, if the fold can end by then: judged by how long the last fold
   took (`_eta`; on a large tree a fold takes seconds, and every search of a checkout waiting
   `wait_s` in vain made each one that much slower). Folded in time: `current`. Not: it answers from the loaded
   generation with the changed paths masked out, so no stale chunk is ever returned, marked
   `updating` with how many paths are not folded in yet and which (the first
   `PENDING_SHOWN`); the fold goes on, and a later call sees it. Without events the changes are
   unknown until the walk ends: the answer is marked `unverified` (results reflect the files as
   of the last completed check, `verified_at`).

With events, a full check still runs in the background every `VERIFY_INTERVAL_S` (spaced by
its own cost), so a change the kernel dropped (event queue overflow) is caught without any
search waiting for it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from search_engine.config import DEFAULT_FRESH_WAIT_S
from search_engine.live.watcher import ChangeLog
from search_engine.models import Detection, Freshness, FreshnessState

log = logging.getLogger(__name__)


# Changed paths an answer names (all of them are masked out, and counted).
PENDING_SHOWN = 20
VERIFY_INTERVAL_S = 60.0
# A fold no search waits for (the live layer answers meanwhile) starts this much later: its work
# (a walk, stats, chunking, writing) competes with the search that found the change for the
# interpreter and the cores, and the changes of a burst gather into one fold.
FOLD_DELAY_S = 0.3
# A background verification waits at least this many times as long as the last fold took.
VERIFY_SPACING = 10.0


@dataclass(frozen=True, slots=True)
class Settled:
    """What state of the files one search answers from.

    `state`: `current` (every change completed before the call is in), `updating` (the
    `pending` paths changed and are not folded in yet: left out of the results), `unverified`
    (changes could not be checked in time; results reflect the files as of `verified_at`).
    `as_of` is the wall-clock time the call began; `pending` is every changed path the
    search leaves out, files or directories (a directory covers what is beneath it; "" is the
    whole root). `live`: the changed files (or deleted paths) not folded in yet that the search
    takes as they are now (`search_engine.live.layer`); with it, the answer is `current`."""

    state: FreshnessState
    as_of: float
    verified_at: float
    detection: Detection
    pending: frozenset[str] = frozenset()
    reason: str | None = None
    live: frozenset[str] = frozenset()

    def report(self) -> Freshness:
        """What an answer says of it (`search_engine.models.Freshness`)."""
        shown = sorted(self.pending)[:PENDING_SHOWN]
        return Freshness(
            self.state, self.as_of, self.verified_at, self.detection, len(self.pending), shown, self.reason
        )


class LiveRoot:
    """Keeps one root's index caught up with its files (see the module docstring).

    `fold()` brings the index up to the files as they are when it starts (an incremental
    update and loading the result), unless `round_covered()` says an update made meanwhile
    already did; it runs on this object's thread, one at a time. `watcher` is None when
    changes are found by polling, with `poll_reason` saying why."""

    def __init__(
        self,
        fold: Callable[[], None],
        watcher: ChangeLog | None,
        *,
        poll_reason: str | None = None,
        wait_s: float = DEFAULT_FRESH_WAIT_S,
        live_limit: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fold = fold
        self.live_limit = live_limit
        self.watcher = watcher
        self.poll_reason = poll_reason
        self.wait_s = wait_s
        self._clock = clock
        self._cond = threading.Condition()
        # What the last completed fold covered: the watcher's change counter and the count
        # of full checks asked for (the first one: whatever changed while no one watched).
        self._folded_seq = 0
        self._folded_checks = 0
        self._checks = 1
        self._verified_at = 0.0  # wall clock of the start of the last completed fold
        self._last_fold_s = 0.0
        self._last_fold_end = clock()
        # The running fold's start (clock) and what it covers, None between folds; whether it
        # is a background verification.
        self._round: tuple[float, tuple[int, int]] | None = None
        self._round_verifies = False
        self._verify = False
        self._running: threading.Thread | None = None
        self.error: str | None = None

    @property
    def detection(self) -> Detection:
        return "events" if self.watcher is not None and self.watcher.failure is None else "polling"

    def snapshot(self) -> tuple[int, int]:
        """What a fold starting now will cover; pass it to `folded_through` after an update
        made outside this object (a build, `codepager index`)."""
        with self._cond:
            return (self.watcher.seq if self.watcher is not None else 0), self._checks

    def folded_through(self, covered: tuple[int, int]) -> None:
        """Record an update made outside this object that started at `snapshot()` == `covered`."""
        with self._cond:
            self._folded_seq = max(self._folded_seq, covered[0])
            self._folded_checks = max(self._folded_checks, covered[1])
            self._verified_at = time.time()
            if self.watcher is not None:
                self.watcher.forget(covered[0])
            self._cond.notify_all()

    def round_covered(self) -> bool:
        """Whether an update recorded since the running fold began (`folded_through`) covers
        everything that fold was started for, so it has nothing to bring in; asked by the fold
        once it may write (the root's lock held). Never for a background verification, whose
        point is a walk of its own."""
        with self._cond:
            return self._round is not None and not self._round_verifies and self._covers(self._round[1])

    def settle(self) -> Settled:
        """Bring the index up to every change completed before this call, waiting at most
        `wait_s`, and say what state the search will answer from."""
        as_of = time.time()
        deadline = self._clock() + self.wait_s
        seq = self.watcher.barrier() if self.watcher is not None else None
        with self._cond:
            if seq is None:  # no events to go by: a full check that starts after now
                self._checks += 1
            else:
                self._maybe_verify()
            wanted = (seq or 0, self._checks)
            if self._covers(wanted):
                return self._settled("current", as_of)
            live = self._live(seq, wanted)
            if live is not None:  # no one waits for this fold: it lets the search go first
                self._start(FOLD_DELAY_S)
                return self._settled("current", as_of, live=live)
            self._start()
            if self._eta(wanted) <= deadline:
                self._cond.wait_for(lambda: self._covers(wanted) or self._running is None, deadline - self._clock())
            if self._covers(wanted):
                return self._settled("current", as_of)
            if seq is None or self._folded_checks < wanted[1] or self.watcher is None:
                # No events to go by, or the full check after opening the index is not done:
                # which files changed is unknown.
                return self._settled("unverified", as_of)
            pending, overflow = self.watcher.changed_after(self._folded_seq)
            if overflow:
                return self._settled("unverified", as_of)
            return self._settled("updating", as_of, pending)

    def wait_idle(self, timeout_s: float | None = None) -> bool:
        """Wait until no fold is running (tests, shutdown); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._running is None, timeout_s)

    def close(self) -> None:
        if self.watcher is not None:
            self.watcher.close()

    def _covers(self, wanted: tuple[int, int]) -> bool:
        return self._folded_seq >= wanted[0] and self._folded_checks >= wanted[1]

    def _live(self, seq: int | None, wanted: tuple[int, int]) -> frozenset[str] | None:
        """The changed paths, when the search can take them as they are now instead of
        waiting for the fold (caller holds the lock): every change is placed (events, no
        overflow, the first full check done), they are at most `live_limit`, and none is an
        existing directory (a directory moved in or whose ignore file changed: its files are
        the fold's to list) or the root."""
        if seq is None or self.watcher is None or self._folded_checks < wanted[1]:
            return None
        pending, overflow = self.watcher.changed_after(self._folded_seq)
        if overflow or not 0 < len(pending) <= self.live_limit or "" in pending:
            return None
        if any((self.watcher.root / p).is_dir() for p in pending):
            return None
        return pending

    def _eta(self, wanted: tuple[int, int]) -> float:
        """When a fold covering `wanted` may end (clock), if it takes as long as the last one
        (caller holds the lock; the fold thread is started): the running fold's end if it covers
        `wanted`, else the end of the one after it. Before any fold: now (worth waiting for). A
        running fold already longer than the last one may take any time (a checkout's 1,000
        files after a fold of a few): infinity, so no search waits for it in vain."""
        now = self._clock()
        if self._round is None:  # about to start
            return now + self._last_fold_s
        started, covered = self._round
        end = started + self._last_fold_s
        if now > end:
            return math.inf
        return end if covered[0] >= wanted[0] and covered[1] >= wanted[1] else end + self._last_fold_s

    def _maybe_verify(self) -> None:
        """With events, ask for a background full check when one is due (caller holds the lock)."""
        spacing = max(VERIFY_INTERVAL_S, VERIFY_SPACING * self._last_fold_s)
        if self._running is None and self._clock() - self._last_fold_end >= spacing:
            self._verify = True
            self._start()

    def _settled(
        self,
        state: FreshnessState,
        as_of: float,
        pending: frozenset[str] = frozenset(),
        live: frozenset[str] = frozenset(),
    ) -> Settled:
        reason = self.error
        if reason is None and self.detection == "polling":
            reason = self.poll_reason or (self.watcher.failure if self.watcher is not None else None)
        return Settled(state, as_of, self._verified_at, self.detection, pending, reason, live)

    def _start(self, delay_s: float = 0.0) -> None:
        """Start the fold thread unless it runs, after `delay_s` (caller holds the lock)."""
        if self._running is None:
            self._running = threading.Thread(target=self._loop, args=(delay_s,), name="codepager-fold", daemon=True)
            self._running.start()

    def _loop(self, delay_s: float) -> None:
        if delay_s:
            time.sleep(delay_s)
        while True:
            with self._cond:
                seq = self.watcher.seq if self.watcher is not None else 0
                checks, verify = self._checks, self._verify
                if self._covers((seq, checks)) and not verify:
                    self._running = None
                    self._cond.notify_all()
                    return
                self._verify = False
                started, wall = self._clock(), time.time()
                self._round = (started, (seq, checks))
                self._round_verifies = verify
            try:
                self._fold()
            except Exception as exc:  # the search answers from what it has, and says why
                log.warning("bringing the index up to date failed: %s", exc)
                with self._cond:
                    self.error = f"bringing the index up to date failed: {exc}"
                    self._running = self._round = None
                    self._last_fold_end = self._clock()
                    self._cond.notify_all()
                return
            with self._cond:
                self.error = None
                self._folded_seq, self._folded_checks = max(self._folded_seq, seq), max(self._folded_checks, checks)
                self._verified_at = wall
                self._last_fold_end = self._clock()
                self._last_fold_s = self._last_fold_end - started
                self._round = None
                if self.watcher is not None:
                    self.watcher.forget(seq)
                self._cond.notify_all()
