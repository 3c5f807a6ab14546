"""The live layer: files changed since the index generation a search answers from, chunked and
embedded when a search needs them, and ranked beside that generation as one index.

Folding one edit into a new generation rewrites the whole index (seconds on a large tree), so a
search does not wait for it (`search_engine.live.read_your_writes`): it takes the changed files as they are now
(a few milliseconds a file: read, chunk, embed with the static model), joins them to the
generation (`Corpus.join`: chunk and file ids after the generation's) and hides the
generation's chunks of those paths (a deleted file, or a path under a deleted directory, is
only hidden). Ranking then sees one index: BM25 scored with the statistics of both sides, the
same vectors, priors and file-level signals (what differs from a freshly built index: the
hidden old chunks still count in BM25's document frequencies and average length, the vector
index's coarse lists and rescoring pool are the generation's plus every live chunk, and a
symbol's tiers are judged per side, see `search_engine.ranking.symbols.JoinedSymbols`).

A file is made once per (size, mtime, inode): a run of searches after one edit embeds it once.
A new file (not in the generation) is joined only if discovery lists it (ignore files, hidden
names, size and binary rules, as the fold would). The joined ranker is kept for the last
(generation, files) pair and dropped when the fold's generation makes the layer empty.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np

from search_engine.chunking.chunk import Chunk
from search_engine.chunking.jobs import ChunkJob, KeptWorker
from search_engine.config import EngineConfig
from search_engine.embedding.embedder import Embedder, chunk_text
from search_engine.files.discovery import DiscoveredFile, discover
from search_engine.files.paths import SearchLocation
from search_engine.index.vectors import VectorIndex, quantize
from search_engine.ranking.corpus import LivePart
from search_engine.ranking.lexical import LexicalBuilder
from search_engine.ranking.search import Ranker

# Changed files a search takes live (each costs ~5-50 ms to chunk and embed the first time);
# more (a checkout) and it waits for the fold instead, up to `fresh_wait_s`.
MAX_LIVE_FILES = 16
# Distinct folders listed to check new files against discovery's rules, per search.
MAX_NEW_FOLDERS = 16

Stamp = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class _Made:
    """One file's chunks as they are at `stamp`, their lexical documents and float vectors."""

    stamp: Stamp
    chunks: list[Chunk]
    documents: list[list[str]]
    vectors: np.ndarray


def stamp_of(path: Path) -> Stamp | None:
    """(size, mtime_ns, inode) of a regular file, None for anything else or nothing."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    if (st.st_mode & 0o170000) != 0o100000:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


class LiveLayer:
    """The live layer of one root (see the module docstring); shared by its searches."""

    def __init__(self, root: Path, embedder: Embedder, config: EngineConfig, worker: KeptWorker) -> None:
        self.root = root
        self._embedder = embedder
        self._config = config
        self._worker = worker
        self._lock = threading.Lock()
        self._made: dict[str, _Made] = {}
        self._joined: tuple[object, Ranker] | None = None

    def ranker(self, base: Ranker, paths: frozenset[str]) -> Ranker:
        """A ranker over `base`'s generation with `paths` (changed files or deleted paths) as
        they are now."""
        stamps = {p: stamp_of(self.root / p) for p in sorted(paths)}
        key = (base, tuple(stamps.items()))
        with self._lock:
            if self._joined is not None and self._joined[0] == key:
                return self._joined[1]
            listed = self._listed(base, [p for p, s in stamps.items() if s is not None])
            made = self._make(listed, stamps)
            self._made = {p: m for p, m in made}  # only the current layer's files are kept
            ranker = base.beside(_part(made, base), frozenset(paths))
            self._joined = (key, ranker)
            return ranker

    def clear(self) -> None:
        """The layer is empty (everything is folded in): let go of what it made."""
        with self._lock:
            self._made.clear()
            self._joined = None

    def _listed(self, base: Ranker, files: list[str]) -> list[str]:
        """`files` a fold would index: those of the generation, and the new ones discovery
        lists (checked per folder, at most MAX_NEW_FOLDERS; beyond, new files wait for the fold)."""
        known = base.paths
        new = [p for p in files if p not in known]
        folders = sorted({str(PurePosixPath(p).parent) for p in new})
        listed: set[str] = set()
        for folder in folders[:MAX_NEW_FOLDERS]:
            sub = None if folder == "." else folder
            found = discover(SearchLocation(self.root, sub), config=self._config).files
            listed.update(f.path for f in found)
        return [p for p in files if p in known or p in listed]

    def _make(self, paths: list[str], stamps: dict[str, Stamp | None]) -> list[tuple[str, _Made]]:
        """Each of `paths`' chunks and vectors now (kept from an earlier search if unchanged),
        in order; a file no longer a readable text file under the size limit is left out. The
        files are chunked in a chunking worker, as a build's are: a parse of a few KB can take
        gigabytes, and only a worker is limited; one kept running, so a search does not wait for
        a process to start (`search_engine.chunking.jobs.KeptWorker`)."""
        kept = {p: m for p in paths if (m := self._made.get(p)) is not None and m.stamp == stamps[p]}
        jobs = [
            ChunkJob(DiscoveredFile(p, self.root, p, stamp[0], stamp[1]), None)
            for p in paths
            if p not in kept and (stamp := stamps[p]) is not None
        ]
        chunked = self._worker.chunk(jobs, self._config.max_file_size) if jobs else []
        for job, result in zip(jobs, chunked, strict=True):
            if result is None or result.chunks is None or result.documents is None:
                continue
            vectors = np.asarray(self._embedder.embed([chunk_text(c) for c in result.chunks]), dtype=np.float32)
            stamp = stamps[job.file.path]
            assert stamp is not None
            kept[job.file.path] = _Made(stamp, result.chunks, result.documents, vectors)
        return [(p, kept[p]) for p in paths if p in kept]


def _part(made: list[tuple[str, _Made]], base: Ranker) -> LivePart:
    """The live side of a joined corpus from the made files (in path order)."""
    made = [(p, m) for p, m in made if m.chunks]
    chunks = [c for _, m in made for c in m.chunks]
    builder = LexicalBuilder()
    for _, m in made:
        for chunk, document in zip(m.chunks, m.documents, strict=True):
            builder.add(chunk.path, document)
    lexical = builder.finish().beside(base.lexical)
    dim = base.dim
    floats = np.concatenate([m.vectors for _, m in made]) if made else np.zeros((0, dim), np.float32)
    codes, scales, words = quantize(floats)
    file_vectors = np.zeros((len(made), dim), dtype=np.float32)
    for f, (_, m) in enumerate(made):
        mean = m.vectors.mean(axis=0)
        file_vectors[f] = mean / max(float(np.linalg.norm(mean)), 1e-9)
    counts = [len(m.chunks) for _, m in made]
    file_of = np.repeat(np.arange(len(made), dtype=np.int64), counts)
    return LivePart(
        chunks,
        VectorIndex(codes, scales, np.ascontiguousarray(words.T), file_vectors),
        lexical,
        [p for p, _ in made],
        file_of,
        [m.chunks[0].language for _, m in made],
    )
