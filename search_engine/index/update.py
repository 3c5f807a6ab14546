"""Bringing a root's index up to date: the incremental update algorithm.

One pass, under the writer lock:
1. Load the live generation if it is compatible (same format, chunker, model, lexical
   version); anything else (no index, an older format, a damaged one, another model) means a
   full rebuild.
2. Discover files exactly as regex search does (`search_engine.files.discovery.discover`).
3. A file whose mtime and size match the index is unchanged: its rows (chunk metadata, text,
   vectors, postings) are copied from the old generation without reading it. Otherwise it
   is read and hashed; same digest (touched, or checked out again) -> copied too; different
   -> re-chunked.
4. If nothing changed, the generation stays (touched files' new mtimes are recorded in place).
5. Otherwise a new generation is streamed out file by file (`IndexStore.begin`): new and
   edited files are chunked, and their chunks embedded in batches of `EMBED_BATCH`, as the
   pass reaches them. Only chunks whose embedding text is new are embedded: an edit to one
   function of a large file re-embeds that function, not the file. Memory holds one batch of
   chunks and the growing columns, never every chunk; the generation is published
   atomically at the end (`search_engine.index.store`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from search_engine.chunking.chunker import CHUNKER_VERSION
from search_engine.chunking.jobs import ChunkedFile, ChunkJob, ChunkStream, chunk_files, workers
from search_engine.chunking.workers import start_forkserver
from search_engine.config import EngineConfig
from search_engine.embedding.embedder import Embedder, chunk_text
from search_engine.errors import IndexDamagedError, IndexStoreError
from search_engine.files.discovery import DiscoveredFile, discover
from search_engine.files.paths import SearchLocation
from search_engine.index.chunk_table import key_of_text
from search_engine.index.store import FORMAT_VERSION, FileEntry, GenerationWriter, IndexStore, Manifest, Snapshot
from search_engine.ranking.lexical import LEXICAL_VERSION

log = logging.getLogger(__name__)

# (phase, done, total): phases are "scan", "chunk", "embed", "write", reported in that order
# (a progress bar only moves forward). "chunk" and "embed" count files (done out of the files
# being read); chunking and embedding alternate as batches fill, so the build reports "chunk"
# until its first batch is embedded and "embed" from then on.
Progress = Callable[[str, int, int], None]

# Texts per embedding call: large enough that the static model's per-batch word table pays
# off (1,024 -> 4,096 saved ~15% of embedding CPU), small enough to bound the chunks held.
EMBED_BATCH = 4096
DEFAULT_LOCK_TIMEOUT_S = 600.0


@dataclass(slots=True)
class UpdateStats:
    """What one update did. `rebuilt` with `reason` when the old index could not be reused."""

    generation: int
    changed: bool
    rebuilt: bool
    reason: str | None
    files: int
    chunks: int
    added: int = 0
    modified: int = 0
    deleted: int = 0
    touched: int = 0
    chunks_embedded: int = 0
    seconds: float = 0.0
    phase_seconds: dict[str, float] = field(default_factory=dict)
    # What discovery said of the files (`Discovery`): ignore files not read; what rules left out.
    warnings: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _FileState:
    """A discovered file and where its rows come from: the old index (`reuse`), chunks made
    while classifying (`new`, an edited file), or neither yet (an added file, chunked when
    the write reaches it)."""

    file: DiscoveredFile
    digest: str
    reuse: FileEntry | None
    new: ChunkedFile | None


def update_index(
    root: Path,
    store: IndexStore,
    embedder: Embedder,
    config: EngineConfig,
    *,
    full: bool = False,
    progress: Progress | None = None,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> UpdateStats:
    """Bring the index of `root` up to date (or rebuild it with `full`)."""
    started = time.perf_counter()
    report = progress or (lambda phase, done, total: None)
    with store.lock(lock_timeout_s):
        old, reason = (None, "full rebuild requested") if full else _compatible(store, embedder.model_id, root)
        try:
            return _update(root, store, embedder, config, old, reason, report, started)
        except IndexDamagedError as exc:
            if old is None:
                raise
            # A part of the old generation read only now (its lexical postings, symbol
            # definitions or text, copied forward) is damaged: build the new one from scratch.
            log.warning("%s", exc)
            old.release()
            old = None
            return _update(root, store, embedder, config, None, str(exc), report, started)
        finally:
            if old is not None:
                old.release()


def _update(
    root: Path,
    store: IndexStore,
    embedder: Embedder,
    config: EngineConfig,
    old: Snapshot | None,
    reason: str | None,
    report: Progress,
    started: float,
) -> UpdateStats:
    phases: dict[str, float] = {}
    t = time.perf_counter()
    if old is None:  # every file is to be chunked: the workers' forkserver starts during the listing
        start_forkserver()
    discovery = discover(SearchLocation(root, None), config=config)
    discovered = discovery.files
    report("scan", len(discovered), len(discovered))
    states, stats = _classify(discovered, old, report, config.max_file_size)
    phases["scan"] = time.perf_counter() - t
    stats.deleted = len(old.files) - sum(1 for s in states if s.file.path in old.files) if old else 0
    stats.rebuilt = old is None
    stats.reason = reason
    stats.warnings, stats.notices = discovery.warnings, discovery.notices
    if old is not None and not (stats.added or stats.modified or stats.deleted):
        if stats.touched:
            store.refresh_files(_file_table(states, old))
        stats.generation = old.manifest.generation
        stats.files, stats.chunks = len(states), old.manifest.chunks
        stats.seconds = time.perf_counter() - started
        stats.phase_seconds = phases
        return stats
    t = time.perf_counter()
    added = [ChunkJob(s.file, None) for s in states if s.reuse is None and s.new is None]
    if added:  # the workers' forkserver starts (if it has not) while the model loads, not after
        start_forkserver()
        embedder.load()
    writer = store.begin(old)
    reads = ChunkStream(added, config.max_file_size, workers())
    try:
        to_read = sum(1 for s in states if s.reuse is None)
        stream = _Stream(writer, old, embedder, report, reads, phases, to_read)
        for state in states:
            stream.add(state)
        stream.flush()
        phases["chunk+embed"] = time.perf_counter() - t - phases.get("embed", 0.0)
        t = time.perf_counter()
        report("write", 0, 1)
        generation = max(store.latest_generation(), old.manifest.generation if old else 0) + 1
        manifest = Manifest(
            format_version=FORMAT_VERSION,
            chunker_version=CHUNKER_VERSION,
            model_id=embedder.model_id,
            lexical_version=LEXICAL_VERSION,
            generation=generation,
            root=str(root),
            dim=writer.dim if writer.dim is not None else _dim(embedder),
            files=len(writer.files),
            chunks=writer.chunks,
            updated_at=time.time(),
        )
        writer.publish(manifest)
    finally:
        reads.close()
        writer.abandon()
    report("write", 1, 1)
    phases["write"] = time.perf_counter() - t
    stats.added, stats.modified = stream.added, stream.modified
    stats.generation, stats.changed = generation, True
    stats.files, stats.chunks, stats.chunks_embedded = len(writer.files), writer.chunks, stream.embedded
    stats.seconds = time.perf_counter() - started
    stats.phase_seconds = phases
    return stats


def _compatible(store: IndexStore, model_id: str, root: Path) -> tuple[Snapshot | None, str | None]:
    """The live generation if it can be updated in place, else None and why not. Its lexical
    postings are read here, not lazily: damaged, they must make this a rebuild even when no
    file changed (an unchanged tree otherwise kept the damage for good)."""
    try:
        old = store.load()
        if old is not None:
            try:
                old.lexical()
            except IndexStoreError:
                old.release()
                raise
    except IndexStoreError as exc:
        log.warning("%s", exc)
        return None, str(exc)
    if old is None:
        return None, "no index yet"
    reason = stale_reason(old.manifest, model_id, root)
    return (None, reason) if reason else (old, None)


def stale_reason(manifest: Manifest, model_id: str, root: Path) -> str | None:
    """Why an index described by `manifest` must be rebuilt rather than updated (None: it
    can be updated in place)."""
    if manifest.format_version != FORMAT_VERSION:
        return f"index format {manifest.format_version}, this version reads {FORMAT_VERSION}"
    if manifest.chunker_version != CHUNKER_VERSION:
        return f"chunker changed ({manifest.chunker_version} -> {CHUNKER_VERSION})"
    if manifest.model_id != model_id:
        return f"embedding model changed ({manifest.model_id} -> {model_id})"
    if manifest.lexical_version != LEXICAL_VERSION:
        return f"lexical index changed ({manifest.lexical_version} -> {LEXICAL_VERSION})"
    if manifest.root != str(root):
        return f"index directory belonged to {manifest.root}"
    return None


def _classify(
    discovered: list[DiscoveredFile], old: Snapshot | None, report: Progress, max_size: int
) -> tuple[list[_FileState], UpdateStats]:
    """Decide per file: reuse (unchanged or touched), re-chunked (an indexed file whose
    content changed: chunked now, read no further than `max_size` bytes) or added (chunked
    later, as the write reaches it). Counts an added file only once it is read."""
    stats = UpdateStats(generation=0, changed=False, rebuilt=False, reason=None, files=0, chunks=0)
    old_files = old.files if old else {}
    states: list[_FileState | None] = []
    jobs: list[ChunkJob] = []
    pending: list[int] = []
    for f in discovered:
        entry = old_files.get(f.path)
        if entry is not None and entry.mtime_ns == f.mtime_ns and entry.size == f.size:
            states.append(_FileState(f, entry.digest, entry, None))
        elif entry is None:
            states.append(_FileState(f, "", None, None))
            stats.added += 1
        else:
            pending.append(len(states))
            states.append(None)
            jobs.append(ChunkJob(f, entry.digest))
    chunked = chunk_files(jobs, max_size, lambda d, t: report("chunk", d, t)) if jobs else []
    for slot, result in zip(pending, chunked, strict=True):
        if result is None:
            continue  # vanished, unreadable or binary after all: not indexed
        f = discovered[slot]
        entry = old_files[f.path]
        if result.chunks is None:
            states[slot] = _FileState(f, result.digest, entry, None)
            stats.touched += 1
        else:
            states[slot] = _FileState(f, result.digest, None, result)
            stats.modified += 1
    return [s for s in states if s is not None], stats


class _Stream:
    """Feeds files to a `GenerationWriter` in order. New chunks wait in a batch until
    `EMBED_BATCH` texts are pending (or a copied file must be written after them), then are
    embedded together, each distinct text once; a chunk whose embedding text the old index
    already has for that file keeps its vector."""

    def __init__(
        self,
        writer: GenerationWriter,
        old: Snapshot | None,
        embedder: Embedder,
        report: Progress,
        reads: ChunkStream,
        phases: dict[str, float],
        to_read: int,
    ) -> None:
        self.writer, self.old, self.embedder, self.report = writer, old, embedder, report
        self.reads, self.phases = reads, phases  # `reads`: the added files' chunks, in order
        self.pending: list[tuple[_FileState, ChunkedFile, list[int], list[tuple[bool, int]]]] = []
        self.texts: list[str] = []
        self.text_index: dict[int, int] = {}
        self.to_read = to_read  # files to chunk or write anew: the progress total
        self.done = 0
        self.phase = "chunk"  # "embed" once the first batch is embedded: phases never go back
        self.added = self.modified = self.embedded = 0

    def add(self, state: _FileState) -> None:
        if state.reuse is not None:
            self.flush()
            self.writer.copy(state.file.path, _entry(state, state.reuse), state.reuse)
            return
        chunked = state.new
        if self.phase == "chunk" and self.done % 64 == 0:  # once embedding, `flush` reports
            self.report("chunk", self.done, self.to_read)
        self.done += 1
        if chunked is None:
            result = next(self.reads)
            if result is None or result.chunks is None:
                return  # vanished, unreadable or binary after all: not indexed
            chunked = result
            state.digest = chunked.digest
            self.added += 1
        else:
            self.modified += 1
        assert chunked.chunks is not None
        texts = [chunk_text(c) for c in chunked.chunks]
        keys = [key_of_text(t) for t in texts]
        old_rows = self._old_rows_by_key(state.file.path) if state.new is not None else {}
        sources: list[tuple[bool, int]] = []  # per chunk: (from the old index?, row or text index)
        for text, key in zip(texts, keys, strict=True):
            if key in old_rows:
                sources.append((True, old_rows[key]))
                continue
            if key not in self.text_index:
                self.text_index[key] = len(self.texts)
                self.texts.append(text)
            sources.append((False, self.text_index[key]))
        self.pending.append((state, chunked, keys, sources))
        if len(self.texts) >= EMBED_BATCH:
            self.flush()

    def flush(self) -> None:
        """Embed the pending texts and write the pending files, in order."""
        if not self.pending:
            return
        t = time.perf_counter()
        self.phase = "embed"
        self.report("embed", self.done - len(self.pending), self.to_read)
        fresh = self.embedder.embed(self.texts) if self.texts else None
        self.embedded += len(self.texts)
        self.phases["embed"] = self.phases.get("embed", 0.0) + time.perf_counter() - t
        # Nothing embedded: every vector came from the old generation, or the pending files
        # have no chunks at all (a tree of empty files), whose vectors are 0 x dim.
        dim = fresh.shape[1] if fresh is not None else self.writer.dim
        if dim is None:
            dim = _dim(self.embedder)
        for state, chunked, keys, sources in self.pending:
            assert chunked.chunks is not None
            vectors = np.empty((len(sources), dim), dtype=np.float32)
            from_old = np.array([old for old, _ in sources], dtype=bool)
            rows = np.array([i for _, i in sources], dtype=np.int64)
            if from_old.any():  # one read of the old generation's rows, not one per chunk
                assert self.old is not None
                vectors[from_old] = self.old.vectors.rows(rows[from_old])
            if not from_old.all():
                assert fresh is not None
                vectors[~from_old] = fresh[rows[~from_old]]
            self.writer.add(
                state.file.path,
                _entry(state, None),
                chunked.chunks,
                vectors,
                chunked.documents,
                keys,
                over_budget=chunked.over_budget,
            )
        self.report("embed", self.done, self.to_read)
        self.pending.clear()
        self.texts.clear()
        self.text_index.clear()

    def _old_rows_by_key(self, path: str) -> dict[int, int]:
        """The old rows of an edited file by embedding-text key: an edit to one function
        leaves its neighbours' chunks identical, and those keep their vectors."""
        entry = self.old.files.get(path) if self.old is not None else None
        if entry is None or self.old is None:
            return {}
        keys = self.old.chunks.rows["text_hash"][entry.first : entry.first + entry.count]
        return {int(k): entry.first + j for j, k in enumerate(keys.tolist())}


def _entry(state: _FileState, reuse: FileEntry | None) -> FileEntry:
    """The file table row for a file as discovered now (its chunk range is the writer's)."""
    return FileEntry(state.file.mtime_ns, state.file.size, state.digest, 0, reuse.count if reuse else 0)


def _dim(embedder: Embedder) -> int:
    """The model's dimension when nothing was embedded (an empty tree): a query against the
    empty index still needs vectors of the right width."""
    return int(embedder.embed(["dimension probe"]).shape[1])


def _file_table(states: list[_FileState], old: Snapshot) -> dict[str, FileEntry]:
    """The live file table with touched files' new mtime and size (chunks unchanged)."""
    table = dict(old.files)
    for s in states:
        if s.reuse is not None:
            table[s.file.path] = FileEntry(s.file.mtime_ns, s.file.size, s.digest, s.reuse.first, s.reuse.count)
    return table
