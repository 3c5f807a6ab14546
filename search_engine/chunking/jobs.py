"""Reading, hashing and chunking the files an update must look at.

One job per added or changed file: read it beneath its root (`infra.beneath`: no
symlink swapped in since discovery, for the file or any directory above it, can lead the read
outside the root) and no more than `max_size` bytes of it, hash it, and unless its content is
what the index already holds, chunk it and compute each chunk's lexical document, the other
per-chunk CPU cost of a build.

Every job runs in a chunking worker (`search_engine.chunking.workers`), whatever the build's size:
a parse can take gigabytes of a file of a few KB, and a worker is limited to what one parse
may take. A build reads its files through a `ChunkStream`, which runs up to `workers()`
processes (chunking is most of a build's CPU, and tree-sitter holds the GIL, so threads
cannot help) at most `AHEAD` batches ahead of the writer, so the chunks waiting in memory
stay bounded whatever the tree's size; results come back in job order, so the index is the
same however many workers read it.

A worker that dies (a parse past its limit: SIGSEGV) or runs out of memory fails its batch and,
the pool being broken, every batch in flight. Those batches are run again one file at a time
on a single worker, in order, so the file it dies on is known: that one is indexed as plain
text (line windows, as a file without a grammar; `ChunkedFile.over_budget`, which the index
keeps and `index_status` reports), and the others are chunked as usual.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from infra import read_beneath
from search_engine.chunking.chunk import Chunk
from search_engine.chunking.chunker import chunk_file
from search_engine.chunking.workers import PARSE_MEMORY_BUDGET, chunking_pool
from search_engine.errors import SearchError
from search_engine.files.discovery import DiscoveredFile
from search_engine.files.languages import language_for
from search_engine.ranking.lexical import lexical_document

# Files per task sent to a worker, and tasks in flight per worker: enough to keep the workers
# busy while the writer embeds, few enough that ~100 files' chunks wait at most.
BATCH = 16
AHEAD = 3
# What ends a batch without a result: its worker died (the pool is then broken), or it ran
# out of memory before a parse could crash it.
_FAILED = (BrokenProcessPool, MemoryError)


#: Files an index's warnings name one by one; past it they say how many more.
_NAMED = 20


def workers() -> int:
    """Processes chunking a build: the cores this process may use, at most 4."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 4))


@dataclass(frozen=True, slots=True)
class ChunkJob:
    """A file to (re)read. `known_digest` is the indexed content's: equal -> not re-chunked."""

    file: DiscoveredFile
    known_digest: str | None


@dataclass(frozen=True, slots=True)
class ChunkedFile:
    """A file's digest and, unless its content is the indexed one, its chunks and their
    lexical documents (aligned). `over_budget`: its chunking worker died or ran out of
    memory on it, so it is chunked as plain text."""

    digest: str
    chunks: list[Chunk] | None
    documents: list[list[str]] | None
    over_budget: bool = False


def chunk_files(jobs: list[ChunkJob], max_size: int, report: Callable[[int, int], None]) -> list[ChunkedFile | None]:
    """One result per job, in order; None for a file that vanished, cannot be read (now lies
    through a symlink, is no longer a regular file), has grown over `max_size` bytes or turns
    out to be binary."""
    results = []
    with ChunkStream(jobs, max_size, workers()) as stream:
        for i, result in enumerate(stream):
            results.append(result)
            if i % 64 == 0:
                report(i, len(jobs))
    report(len(jobs), len(jobs))
    return results


def over_budget_warnings(paths: Sequence[str]) -> list[str]:
    """What to tell of the files indexed as plain text because their parse was over budget:
    a warning naming each of the first `_NAMED`, then one saying how many more."""
    why = (
        f"indexed as plain text (line windows, no symbols): its parse outgrew the {PARSE_MEMORY_BUDGET >> 20} MB "
        "a parse may use (tree-sitter can take gigabytes on a few KB its grammar finds ambiguous); "
        "its text is searched all the same, and it is parsed again once it changes"
    )
    named = [f"{path}: {why}" for path in paths[:_NAMED]]
    more = len(paths) - _NAMED
    return named if more <= 0 else [*named, f"{more} more files indexed as plain text for the same reason"]


def _run(job: ChunkJob, max_size: int, *, structured: bool = True) -> ChunkedFile | None:
    file = job.file
    data = read_beneath(file.root, file.rel, max_size)
    if data is None or b"\0" in data:  # binary after all: discovery only sniffs the head
        return None
    digest = hashlib.blake2b(data, digest_size=16).hexdigest()
    if digest == job.known_digest:
        return ChunkedFile(digest, None, None)
    chunks = chunk_file(file.path, data, language_for(file.path), structured=structured)
    return ChunkedFile(digest, chunks, [lexical_document(c) for c in chunks], over_budget=not structured)


def _run_batch(jobs: Sequence[ChunkJob], max_size: int) -> list[ChunkedFile | None]:
    return [_run(job, max_size) for job in jobs]


def _isolated(jobs: Sequence[ChunkJob], max_size: int) -> list[ChunkedFile | None]:
    """`jobs` run one a task on a single worker, in order, so that when it dies the job it
    was running is the first without a result: that one is chunked as plain text here (line
    windows cost what the file's size does) and the rest go on in a new worker."""
    results: list[ChunkedFile | None] = []
    while len(results) < len(jobs):
        pool = chunking_pool(1)
        futures: list[Future[list[ChunkedFile | None]]] = []
        try:
            _check_start(pool)
            with contextlib.suppress(BrokenProcessPool):  # it died already, on one of those submitted
                futures.extend(pool.submit(_run_batch, [job], max_size) for job in jobs[len(results) :])
            for future in futures:
                results.extend(future.result())
        except _FAILED:
            results.append(_run(jobs[len(results)], max_size, structured=False))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    return results


def _check_start(pool: ProcessPoolExecutor) -> None:
    """Raise SearchError unless `pool`'s worker runs a task: a worker that dies before any
    file (it cannot start) is no file's fault, and would make every file plain text."""
    try:
        pool.submit(_run_batch, [], 0).result()
    except BrokenProcessPool as exc:
        raise SearchError(f"the chunking worker processes cannot start ({exc}); see the log for why") from exc


class ChunkStream(Iterator["ChunkedFile | None"]):
    """`_run` of each job, in job order, from a pool of up to `workers` processes (see the
    module docstring). Close it (or use it as a context manager) to stop the workers."""

    def __init__(self, jobs: Sequence[ChunkJob], max_size: int, workers: int) -> None:
        self._jobs, self._max_size = jobs, max_size
        self._workers = max(1, min(workers, -(-len(jobs) // BATCH)))
        self._ahead = self._workers * AHEAD
        self._next = 0  # the next job to submit
        self._ready: deque[ChunkedFile | None] = deque()
        self._pending: deque[tuple[Future[list[ChunkedFile | None]], Sequence[ChunkJob]]] = deque()
        self._pool: ProcessPoolExecutor | None = chunking_pool(self._workers) if jobs else None
        self._fill()

    def __next__(self) -> ChunkedFile | None:
        if not self._ready:
            if not self._pending:
                raise StopIteration
            future, batch = self._pending.popleft()
            try:
                self._ready.extend(future.result())
            except _FAILED:
                self._recover(future, batch)
            self._fill()
        return self._ready.popleft()

    def _fill(self) -> None:
        while self._pool is not None and len(self._pending) < self._ahead and self._next < len(self._jobs):
            batch = self._jobs[self._next : self._next + BATCH]
            try:
                future = self._pool.submit(_run_batch, batch, self._max_size)
            except BrokenProcessPool:
                if self._pending:
                    return  # the batches in flight fail too, and their recovery starts a pool
                self._restart()
                continue
            self._pending.append((future, batch))
            self._next += len(batch)

    def _recover(self, failed: Future[list[ChunkedFile | None]], batch: Sequence[ChunkJob]) -> None:
        """After `failed` (holding `batch`): each batch in flight that failed with it is run
        again through `_isolated`, one that finished keeps its results."""
        batches = [(failed, batch), *self._pending]
        self._pending.clear()
        self._restart()  # waits for the old pool: every batch in flight has its outcome
        redo = [job for future, jobs in batches if future.exception() is not None for job in jobs]
        isolated = iter(_isolated(redo, self._max_size))
        for future, jobs in batches:
            self._ready.extend(future.result() if future.exception() is None else [next(isolated) for _ in jobs])

    def _restart(self) -> None:
        """A new pool, once the old one has finished what it can (a broken pool: at once)."""
        assert self._pool is not None
        self._pool.shutdown(wait=True)
        self._pool = chunking_pool(self._workers)

    def close(self) -> None:
        """Stop the workers (what they have not started is cancelled); the stream ends."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._next = len(self._jobs)
        self._ready.clear()
        self._pending.clear()

    def __enter__(self) -> ChunkStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class KeptWorker:
    """One chunking worker kept running between calls, for the live layer
    (`search_engine.live.layer`): a search that takes an edited file live has it chunked by a
    worker already forked, a round trip of about a millisecond, where a pool started for the
    call cost 10-40 ms on every edit (a fork from the forkserver, the pool's threads; more on a
    busy machine). It is the limited worker a build uses, so nothing about parse bombs changes:
    a parse past its limit kills it, `_isolated` finds the file (chunked as plain text) and a
    new worker replaces it. After a batch of more than `RECYCLE_BYTES` it is replaced too, so
    the memory a large parse left in it is not held while idle."""

    #: Bytes of files after which the worker is replaced (see the class docstring).
    RECYCLE_BYTES = 1 << 20

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._starting = self._closed = False

    def start(self) -> None:
        """Have the worker forked (and the forkserver started, the first time: 0.4-1 s of
        imports) on a thread of its own, so that no search waits for it; a no-op while one runs
        or is starting."""
        with self._lock:
            if self._pool is not None or self._starting or self._closed:
                return
            self._starting = True
        threading.Thread(target=self._warm, name="codepager-kept-worker", daemon=True).start()

    def chunk(self, jobs: Sequence[ChunkJob], max_size: int) -> list[ChunkedFile | None]:
        """`_run` of each job, in order (as `chunk_files`)."""
        pool = self._ready()
        try:
            results = pool.submit(_run_batch, jobs, max_size).result()
        except _FAILED:
            self._replace(pool)
            return _isolated(jobs, max_size)
        if sum(job.file.size for job in jobs) > self.RECYCLE_BYTES:
            self._replace(pool)
        return results

    def close(self) -> None:
        """Stop the worker; a later call starts none."""
        with self._lock:
            pool, self._pool, self._closed = self._pool, None, True
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def _warm(self) -> None:
        try:
            with contextlib.suppress(SearchError):  # closed, or cannot start: `chunk` says so to its caller
                self._ready()
        finally:
            with self._lock:
                self._starting = False

    def _ready(self) -> ProcessPoolExecutor:
        """The running worker's pool, started (and its worker forked) if there is none."""
        with self._lock:
            if self._closed:
                raise SearchError("the chunking worker was stopped (the index manager is closed)")
            if self._pool is None:
                pool = chunking_pool(1)
                _check_start(pool)  # forked and running a task, or a SearchError saying why not
                self._pool = pool
            return self._pool

    def _replace(self, pool: ProcessPoolExecutor) -> None:
        """Let `pool` go (broken, or holding what a large parse left) and fork the next worker now."""
        with self._lock:
            if self._pool is pool:
                self._pool = None
        pool.shutdown(wait=False)
        if not self._closed:
            self.start()
