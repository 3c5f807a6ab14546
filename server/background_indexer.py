"""Background indexing for the server, so start-up never waits for the model or the index.

At start the server queues every root (unless `index.index_on_start` is off: then the first
semantic or hybrid call, or `reindex`, queues it); one worker thread builds or updates them in
turn (two cores: parallel builds would only fight). Each build goes through the phases of
`PHASES`: loading the model, listing files, chunking, embedding, writing. A semantic or hybrid
call whose root is not ready waits up to `index.ready_wait_s` (30 s: a small repository is
indexed within it, so its first search just answers), sending an MCP progress notification
whenever the build advances; past that it answers `index_not_ready` with the phase, how far it
got and an estimate of the time left, so the agent can retry or use regex meanwhile.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from fastmcp import Context

from search_engine import IndexNotReadyError, IndexStoreError, SearchEngine, SearchError, SearchRequest

log = logging.getLogger("codepager.indexing")

POLL_S = 0.25
# A build's phases in order, each with its share of the overall progress (percent) sent to the
# client: MCP wants a progress value that only grows, while done/total restart every phase.
# The shares follow where a static-profile build spends its time (docs/benchmarks.md).
PHASES: dict[str, tuple[float, float]] = {
    "queued": (0.0, 0.0),
    "model": (0.0, 5.0),
    "scan": (5.0, 10.0),
    "chunk": (10.0, 50.0),
    "embed": (50.0, 90.0),
    "write": (90.0, 100.0),
}
# The phases that count the files being read, out of the same total: a build reports "chunk"
# until its first batch of chunks is embedded and "embed" from then on (`search_engine.index.update`).
_READING = ("chunk", "embed")


@dataclass
class RootState:
    """What the worker has done for one root: `phase` is "idle" (nothing asked yet), one of
    `PHASES`, "ready" or "failed" (`error` set)."""

    phase: str = "queued"
    done: int = 0
    total: int = 0
    ready: bool = False
    error: SearchError | None = None
    started_at: float | None = None
    #: When the first of the files being read was done (the first "chunk" or "embed" report of
    #: a count with some done), and how many were done then: what `eta_s` measures the reading
    #: rate from. Not the count's start, which includes the chunking workers' start-up.
    reading_since: tuple[float, int] | None = None
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)

    @property
    def building(self) -> bool:
        return self.phase in PHASES

    def advance(self, phase: str, done: int, total: int) -> None:
        """Record progress (the worker's `Progress` callback)."""
        if phase in _READING and (self.phase not in _READING or total != self.total):
            self.reading_since = None  # a new count of files
        if phase in _READING and self.reading_since is None and done > 0:
            self.reading_since = (self.clock(), done)
        self.phase, self.done, self.total = phase, done, total

    def percent(self) -> float:
        """Overall progress, 0-100, never decreasing while the phases run in order."""
        low, high = PHASES.get(self.phase, (100.0, 100.0) if self.ready else (0.0, 0.0))
        share = min(self.done / self.total, 1.0) if self.total else 0.0
        return round(low + (high - low) * share, 1)

    def describe(self) -> str:
        """`embed 1200/3400`: the phase and its own count, for messages."""
        return f"{self.phase} {self.done}/{self.total}" if self.total else self.phase

    def eta_s(self) -> float | None:
        """Seconds left while the files are read (chunked and embedded, the long part of a build;
        writing after it is short), at the rate measured so far in this build: the files done
        since the first one was, over the time since. None before two reports tell a rate.
        (Measuring from the start of the "embed" phase, as before, left out the chunking of the
        first batch: 3.3 s estimated with about 70 s to go; measuring from the count's start
        counted the workers' start-up, seconds in which no file is done. The phases' shares of
        the progress bar are no clock either: a model load or a tree of big files shifts them.)"""
        if self.phase not in _READING or self.reading_since is None:
            return None
        since, first = self.reading_since
        elapsed, read = self.clock() - since, self.done - first
        if read <= 0 or elapsed <= 0:
            return None
        return (self.total - self.done) * elapsed / read


class BackgroundIndexer:
    def __init__(
        self, engine: SearchEngine, ready_wait_s: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.engine = engine
        self.ready_wait_s = ready_wait_s
        self.clock = clock
        self._states: dict[Path, RootState] = {}
        self._lock = threading.Lock()
        self._queue: queue.Queue[tuple[Path, bool] | None] = queue.Queue()
        self._worker: threading.Thread | None = None

    def start(self, roots: list[Path]) -> None:
        for root in roots:
            self.request(root)

    def close(self) -> None:
        if self._worker is not None:
            self._queue.put(None)

    def state(self, root: Path) -> RootState:
        """The root's state, without queueing anything: "idle" if no build was ever asked for.
        (Recording a placeholder here once made `request` believe the root was queued, so
        with `index_on_start` off nothing ever built it.)"""
        with self._lock:
            return self._states.get(Path(root)) or RootState(phase="idle", clock=self.clock)

    def request(self, root: Path, *, refresh: bool = False, full: bool = False) -> RootState:
        """Queue `root` for building unless it is already queued, building or ready (and no
        `refresh` is asked for). A failed root is queued again: the next call retries."""
        root = Path(root)
        with self._lock:
            state = self._states.get(root)
            if state is not None and (state.building or (state.ready and not refresh)):
                return state  # queued, building, or ready and no refresh asked for
            state = self._states[root] = RootState(clock=self.clock)
            self._queue.put((root, full))
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name="codepager-indexer", daemon=True)
                self._worker.start()
            return state

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            root, full = item
            state = self.state(root)
            state.started_at = self.clock()
            try:
                # An index already on disk serves searches while it is checked against the tree,
                # or rebuilt (`full`): it stays live until the new generation replaces it, so one
                # client's `reindex full=true` does not take semantic search from every client
                # for the length of a build (found by an audit: index_not_ready for all of it).
                if self.engine.prepare_index(root):
                    state.ready = True
                self.engine.update_index(root, full=full, progress=state.advance)  # the model first
                state.phase, state.ready = "ready", True
            except SearchError as exc:
                log.warning("indexing %s failed: %s", root, exc)
                state.phase, state.error = "failed", exc
            except OSError as exc:  # an environment fault (unwritable or full cache dir), not a bug
                log.warning("indexing %s failed: %s", root, exc)
                state.phase, state.error = (
                    "failed",
                    IndexStoreError(
                        f"the index cannot be written under index.cache_dir ({exc.strerror or exc}: "
                        f"{exc.filename or ''}); semantic and hybrid search need a writable cache dir"
                    ),
                )
            except Exception as exc:  # a bug must not kill the worker for the other roots
                log.exception("indexing %s failed", root)
                state.phase, state.error = "failed", SearchError(f"indexing failed: {exc}")

    async def wait_ready(self, request: SearchRequest, ctx: Context | None) -> None:
        """Return once every root the request searches is indexed (all are queued at once),
        or raise IndexNotReadyError in time."""
        await self.wait({Path(root): self.request(Path(root)) for root in request.searched_roots}, ctx)

    async def wait(self, states: dict[Path, RootState], ctx: Context | None) -> None:
        """Return once every root's state is ready; raise an error of one, or IndexNotReadyError
        (with progress and an estimate) after `ready_wait_s`, one deadline for all. Sends a
        progress notification (overall percent of 100: the roots' mean; the phase and its
        done/total as the message, naming the root when there are several) each time the
        builds advance."""
        deadline = self.clock() + self.ready_wait_s
        sent = -1.0
        while pending := [(root, state) for root, state in states.items() if not state.ready]:
            root, state = pending[0]
            for _, failed in pending:
                if failed.error is not None:
                    raise failed.error  # the next call re-queues the build (see `request`)
            if self.clock() >= deadline:
                raise _not_ready(state, root if len(states) > 1 else None)
            percent = round(sum(100.0 if s.ready else s.percent() for s in states.values()) / len(states), 1)
            if ctx is not None and percent > sent:
                where = f" {root}" if len(states) > 1 else ""
                await ctx.report_progress(percent, 100, f"indexing{where}: {state.describe()}")
                sent = percent
            await anyio.sleep(POLL_S)


def _not_ready(state: RootState, root: Path | None) -> IndexNotReadyError:
    """`root`: named when the search covers several roots (this one is not ready yet)."""
    where = state.describe()
    elapsed = state.clock() - state.started_at if state.started_at is not None else 0.0
    estimate = state.eta_s()
    # One rounding for the field and the sentence, so they never disagree (1.46 -> 1.5 -> "2").
    eta = None if estimate is None else round(estimate, 1)
    later = f"retry in about {eta:.0f} s" if eta is not None else "retry in a few seconds"
    of_root = f" of {root}" if root else ""
    message = (
        f"the semantic index{of_root} is still being built ({where}, {state.percent():.0f}% overall, "
        f"{elapsed:.0f} s so far); {later}, or use regex_search meanwhile"
    )
    return IndexNotReadyError(
        message,
        done=state.done,
        total=state.total or None,
        phase=state.phase,
        eta_s=eta,
    )
