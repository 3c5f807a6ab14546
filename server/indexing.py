"""Background indexing for the server, so start-up never waits for the model or the index.

At start the server queues every root; one worker thread builds or updates them in turn (two
cores: parallel builds would only fight). A semantic or hybrid call whose root is not ready
waits up to `index.ready_wait_s`, sending MCP progress notifications with a total, then answers
`index_not_ready` with how far indexing has got, so the agent can retry or use regex meanwhile.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import anyio
from fastmcp import Context

from search_engine.engine import SearchEngine
from search_engine.errors import IndexNotReadyError, IndexStoreError, SearchError
from search_engine.models import SearchRequest

log = logging.getLogger("codepager.indexing")

POLL_S = 0.25


@dataclass
class RootState:
    """What the worker has done for one root. `error` is set when the last build failed."""

    phase: str = "queued"
    done: int = 0
    total: int = 0
    ready: bool = False
    error: SearchError | None = None
    started_at: float | None = None


class BackgroundIndexer:
    def __init__(self, engine: SearchEngine, ready_wait_s: float) -> None:
        self.engine = engine
        self.ready_wait_s = ready_wait_s
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
        with self._lock:
            return self._states.setdefault(Path(root), RootState())

    def request(self, root: Path, *, refresh: bool = False, full: bool = False) -> RootState:
        """Queue `root` for building unless it is already queued, building or ready (and no
        `refresh` is asked for). A failed root is queued again: the next call retries."""
        root = Path(root)
        with self._lock:
            state = self._states.get(root)
            if state is not None and state.error is None and (not state.ready or not refresh):
                return state  # queued, building, or ready and no refresh asked for
            state = self._states[root] = RootState()
            self._queue.put((root, full))
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name="codepager-indexer", daemon=True)
                self._worker.start()
            return state

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            root, full = item
            state = self.state(root)
            state.started_at = time.monotonic()

            def progress(phase: str, done: int, total: int, state: RootState = state) -> None:
                state.phase, state.done, state.total = phase, done, total

            try:
                if not full and self.engine.indexes.open(root):
                    state.ready = True  # searches use the index on disk while it is checked
                self.engine.indexes.update(root, full=full, progress=progress)
                self.engine.indexes.get(root)  # load it, so the first search is warm
                state.phase, state.ready = "ready", True
            except SearchError as exc:
                log.warning("indexing %s failed: %s", root, exc)
                state.phase, state.error = "failed", exc
            except OSError as exc:  # an environment fault (unwritable or full cache dir), not a bug
                log.warning("indexing %s failed: %s", root, exc)
                state.phase, state.error = "failed", IndexStoreError(
                    f"the index cannot be written under index.cache_dir ({exc.strerror or exc}: "
                    f"{exc.filename or ''}); semantic and hybrid search need a writable cache dir"
                )
            except Exception as exc:  # a bug must not kill the worker for the other roots
                log.exception("indexing %s failed", root)
                state.phase, state.error = "failed", SearchError(f"indexing failed: {exc}")

    async def wait_ready(self, request: SearchRequest, ctx: Context | None) -> None:
        """Return once the request's root is indexed, or raise IndexNotReadyError in time."""
        await self.wait(self.request(Path(request.root)), ctx)

    async def wait(self, state: RootState, ctx: Context | None) -> None:
        deadline = time.monotonic() + self.ready_wait_s
        while not state.ready:
            if state.error is not None:
                raise state.error  # the next call re-queues the build (see `request`)
            if time.monotonic() >= deadline:
                raise IndexNotReadyError(_not_ready_message(state), done=state.done, total=state.total or None)
            if ctx is not None:  # the total is known once discovery has listed the files
                await ctx.report_progress(state.done, state.total or None, f"indexing: {state.phase}")
            await anyio.sleep(POLL_S)


def _not_ready_message(state: RootState) -> str:
    if state.total:
        pct = 100 * state.done / state.total
        where = f"{state.phase}: {state.done}/{state.total} ({pct:.0f}%)"
    else:
        where = state.phase
    elapsed = time.monotonic() - state.started_at if state.started_at else 0.0
    return f"the semantic index is still being built ({where}, {elapsed:.0f} s so far); retry in a few seconds"
