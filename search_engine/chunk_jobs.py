"""Reading, hashing and chunking the files an update must look at.

One job per added or changed file: read it beneath its root (`search_engine.beneath`: no
symlink swapped in since discovery, for the file or any directory above it, can lead the read
outside the root) and no more than `max_size` bytes of it, hash it, and unless its content is
what the index already holds, chunk it and compute each chunk's lexical document, the other
per-chunk CPU cost of a build.

A build reads its files through a `ChunkStream`: in the updating process for a small tree
(each file read when the writer asks for it), in `workers()` processes for one of at least
`POOL_MIN_FILES` files, where chunking is most of a build's CPU (tree-sitter holds the GIL,
so threads cannot help). The pool runs at most `AHEAD` batches ahead of the writer, so the
chunks waiting in memory stay bounded whatever the tree's size; results come back in job
order, so the index is the same either way.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass

from search_engine.beneath import read_beneath
from search_engine.chunking import chunk_file
from search_engine.chunks import Chunk
from search_engine.files import DiscoveredFile
from search_engine.languages import language_for
from search_engine.lexical import lexical_document

# A tree with fewer files to read is read in-process: starting workers costs about a second.
POOL_MIN_FILES = 400
# Files per task sent to a worker, and tasks in flight per worker: enough to keep the workers
# busy while the writer embeds, few enough that ~100 files' chunks wait at most.
BATCH = 16
AHEAD = 3


def workers() -> int:
    """Processes chunking a large build: the cores this process may use, at most 4."""
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
    lexical documents (aligned)."""

    digest: str
    chunks: list[Chunk] | None
    documents: list[list[str]] | None


def chunk_files(jobs: list[ChunkJob], max_size: int, report: Callable[[int, int], None]) -> list[ChunkedFile | None]:
    """One result per job, in order; None for a file that vanished, cannot be read (now lies
    through a symlink, is no longer a regular file), has grown over `max_size` bytes or turns
    out to be binary."""
    results = []
    for i, job in enumerate(jobs):
        results.append(chunk_one(job, max_size))
        if i % 64 == 0:
            report(i, len(jobs))
    report(len(jobs), len(jobs))
    return results


def chunk_one(job: ChunkJob, max_size: int) -> ChunkedFile | None:
    """One file read (bounded by `max_size`, beneath its root) and chunked; see `chunk_files`."""
    file = job.file
    data = read_beneath(file.root, file.rel, max_size)
    if data is None or b"\0" in data:  # binary after all: discovery only sniffs the head
        return None
    digest = hashlib.blake2b(data, digest_size=16).hexdigest()
    if digest == job.known_digest:
        return ChunkedFile(digest, None, None)
    chunks = chunk_file(file.path, data, language_for(file.path))
    return ChunkedFile(digest, chunks, [lexical_document(c) for c in chunks])


def _exit_with(pid: int) -> None:
    """Worker initializer: end this worker when the indexing process `pid` ends. Every worker
    holds both ends of the pool's queues, so one blocked on them never sees its indexer die:
    after a SIGKILL of the indexer, the workers and their forkserver stayed forever."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(1)
    except (AttributeError, OSError):  # no pidfd (not Linux 5.3+): look once a second
        fd = None

    def watch() -> None:
        if fd is not None:
            select.select([fd], [], [])  # readable once the process has exited
        else:
            while _alive(pid):
                time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="codepager-indexer-watch", daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _run_batch(jobs: Sequence[ChunkJob], max_size: int) -> list[ChunkedFile | None]:
    return [chunk_one(job, max_size) for job in jobs]


class ChunkStream(Iterator["ChunkedFile | None"]):
    """`chunk_one` of each job, in job order, from a pool of `workers` processes when there are
    enough jobs (see the module docstring), else in this process as each is asked for.
    Close it (or use it as a context manager) to stop the workers."""

    def __init__(self, jobs: Sequence[ChunkJob], max_size: int, workers: int) -> None:
        self._jobs, self._max_size = jobs, max_size
        self._next = 0  # the next job to hand out (in-process) or submit (pool)
        self._ready: deque[ChunkedFile | None] = deque()
        self._pending: deque[Future[list[ChunkedFile | None]]] = deque()
        self._pool: ProcessPoolExecutor | None = None
        if workers > 1 and len(jobs) >= POOL_MIN_FILES:
            # forkserver: workers never inherit this process's threads or locks
            self._pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("forkserver"),
                                             initializer=_exit_with, initargs=(os.getpid(),))  # fmt: skip
            self._ahead = workers * AHEAD
            self._fill()

    def __next__(self) -> ChunkedFile | None:
        if self._pool is None:
            if self._next >= len(self._jobs):
                raise StopIteration
            self._next += 1
            return chunk_one(self._jobs[self._next - 1], self._max_size)
        if not self._ready:
            if not self._pending:
                raise StopIteration
            self._ready.extend(self._pending.popleft().result())
            self._fill()
        return self._ready.popleft()

    def _fill(self) -> None:
        assert self._pool is not None
        while len(self._pending) < self._ahead and self._next < len(self._jobs):
            batch = self._jobs[self._next : self._next + BATCH]
            self._pending.append(self._pool.submit(_run_batch, batch, self._max_size))
            self._next += len(batch)

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
