"""Reading, hashing and chunking the files an update must look at.

One job per added or changed file: read it beneath its root (`search_engine.beneath`: no
symlink swapped in since discovery, for the file or any directory above it, can lead the read
outside the root) and no more than `max_size` bytes of it, hash it, and unless its content is
what the index already holds, chunk it and compute each chunk's lexical document, the other
per-chunk CPU cost of a build.

Chunking runs in the updating process. Worker processes were measured (a forkserver pool
over the four benchmark corpora as one tree) and gained nothing on this two-core machine
under the load it usually carries, while costing start-up time and the usual
multiprocessing caveats; tree-sitter holds the GIL, so threads cannot help either.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from search_engine.beneath import read_beneath
from search_engine.chunking import chunk_file
from search_engine.chunks import Chunk
from search_engine.files import DiscoveredFile
from search_engine.languages import language_for
from search_engine.lexical import lexical_document


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


def chunk_files(
    jobs: list[ChunkJob], max_size: int, report: Callable[[int, int], None]
) -> list[ChunkedFile | None]:
    """One result per job, in order; None for a file that vanished, cannot be read (now lies
    through a symlink, is no longer a regular file), has grown over `max_size` bytes or turns
    out to be binary."""
    results = []
    for i, job in enumerate(jobs):
        results.append(_run(job, max_size))
        if i % 64 == 0:
            report(i, len(jobs))
    report(len(jobs), len(jobs))
    return results


def _run(job: ChunkJob, max_size: int) -> ChunkedFile | None:
    file = job.file
    data = read_beneath(file.root, file.rel, max_size)
    if data is None or b"\0" in data:  # binary after all: discovery only sniffs the head
        return None
    digest = hashlib.blake2b(data, digest_size=16).hexdigest()
    if digest == job.known_digest:
        return ChunkedFile(digest, None, None)
    chunks = chunk_file(file.path, data, language_for(file.path))
    return ChunkedFile(digest, chunks, [lexical_document(c) for c in chunks])
