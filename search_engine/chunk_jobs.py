"""Reading, hashing and chunking the files an update must look at.

One job per added or changed file: read it (without following a symlink swapped in since
discovery), hash it, and unless its content is what the index already holds, chunk it and
compute each chunk's lexical document, the other per-chunk CPU cost of a build.

Chunking runs in the updating process. Worker processes were measured (a forkserver pool
over the four benchmark corpora as one tree) and gained nothing on this two-core machine
under the load it usually carries, while costing start-up time and the usual
multiprocessing caveats; tree-sitter holds the GIL, so threads cannot help either.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass

from search_engine.chunking import chunk_file
from search_engine.chunks import Chunk
from search_engine.languages import language_for
from search_engine.lexical import lexical_document

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


@dataclass(frozen=True, slots=True)
class ChunkJob:
    """A file to (re)read. `known_digest` is the indexed content's: equal -> not re-chunked."""

    path: str
    os_path: str
    known_digest: str | None


@dataclass(frozen=True, slots=True)
class ChunkedFile:
    """A file's digest and, unless its content is the indexed one, its chunks and their
    lexical documents (aligned)."""

    digest: str
    chunks: list[Chunk] | None
    documents: list[list[str]] | None


def chunk_files(jobs: list[ChunkJob], report: Callable[[int, int], None]) -> list[ChunkedFile | None]:
    """One result per job, in order; None for a file that vanished, cannot be read or turns
    out to be binary."""
    results = []
    for i, job in enumerate(jobs):
        results.append(_run(job))
        if i % 64 == 0:
            report(i, len(jobs))
    report(len(jobs), len(jobs))
    return results


def _run(job: ChunkJob) -> ChunkedFile | None:
    data = _read(job.os_path)
    if data is None:
        return None
    digest = hashlib.blake2b(data, digest_size=16).hexdigest()
    if digest == job.known_digest:
        return ChunkedFile(digest, None, None)
    chunks = chunk_file(job.path, data, language_for(job.path))
    return ChunkedFile(digest, chunks, [lexical_document(c) for c in chunks])


def _read(path: str) -> bytes | None:
    """A file's bytes, not following a symlink swapped in since discovery; None for a binary
    file (discovery only sniffs the head) or one that cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    return None if b"\0" in data else data
