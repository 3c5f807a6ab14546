"""Bringing a root's index up to date: the incremental update algorithm.

One pass, under the writer lock:
1. Load the live generation if it is compatible (same format, chunker, model); anything else
   (no index, an older format, a damaged one, another model) means a full rebuild.
2. Discover files exactly as regex search does (`search_engine.files.discover`).
3. A file whose mtime and size match the index is unchanged: its chunks and vectors are
   reused without reading it. Otherwise it is read and hashed; same digest (touched, or
   checked out again) -> reused too; different -> re-chunked.
4. Only chunks whose embedding text is new are embedded: an edit to one function of a large
   file re-embeds that function, not the file.
5. If nothing changed, the generation stays (touched files' new mtimes are recorded in place);
   otherwise a new generation is published atomically (`search_engine.index_store`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from search_engine.chunk_jobs import ChunkJob, chunk_files
from search_engine.chunking import CHUNKER_VERSION
from search_engine.chunks import Chunk, content_hash
from search_engine.config import EngineConfig
from search_engine.embeddings import Embedder, chunk_text
from search_engine.errors import IndexStoreError
from search_engine.files import DiscoveredFile, discover
from search_engine.index_store import FORMAT_VERSION, FileEntry, IndexStore, Manifest, Snapshot
from search_engine.lexical import LEXICAL_VERSION, LexicalIndex, lexical_document
from search_engine.paths import SearchLocation

log = logging.getLogger(__name__)

# (phase, done, total): phases are "scan", "chunk", "embed", "write".
Progress = Callable[[str, int, int], None]
# (chunk path, content hash) -> the chunk's lexical document (`search_engine.lexical`).
DocumentCache = dict[tuple[str, str], list[str]]

# Texts per embedding call: large enough that the static model's per-batch word table pays
# off (1,024 -> 4,096 saved ~15% of embedding CPU), small enough for a moving progress bar.
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


@dataclass(slots=True)
class _FileState:
    """A discovered file and where its chunks come from: the old index (reuse) or `new`."""

    file: DiscoveredFile
    digest: str
    reuse: FileEntry | None
    new: list[Chunk] | None


def update_index(
    root: Path,
    store: IndexStore,
    embedder: Embedder,
    config: EngineConfig,
    *,
    full: bool = False,
    progress: Progress | None = None,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
    documents: DocumentCache | None = None,
) -> UpdateStats:
    """Bring the index of `root` up to date (or rebuild it with `full`).

    `documents` carries the chunks' lexical documents from one update of a root to the next
    within a process, so an edit re-tokenizes only its own chunks."""
    started = time.perf_counter()
    report = progress or (lambda phase, done, total: None)
    with store.lock(lock_timeout_s):
        old, reason = (None, "full rebuild requested") if full else _compatible(store, embedder.model_id, root)
        phases: dict[str, float] = {}
        t = time.perf_counter()
        discovered = discover(SearchLocation(root, None), (), _cache_exclude(root, config), config)
        report("scan", len(discovered), len(discovered))
        documents = documents if documents is not None else {}
        states, stats = _classify(discovered, old, report, documents, config.max_file_size)
        phases["scan+chunk"] = time.perf_counter() - t
        lexical_stale = old is not None and old.manifest.lexical_version != LEXICAL_VERSION
        deleted = len(old.files) - sum(1 for s in states if s.file.path in old.files) if old else 0
        stats.deleted = deleted
        stats.rebuilt = old is None
        stats.reason = reason
        if old is not None and not (stats.added or stats.modified or deleted or lexical_stale):
            if stats.touched:
                store.refresh_files(_file_table(states, old))
            stats.generation = old.manifest.generation
            stats.files, stats.chunks = len(states), old.manifest.chunks
            stats.seconds = time.perf_counter() - started
            stats.phase_seconds = phases
            return stats
        t = time.perf_counter()
        chunks, vectors, files, embedded = _assemble(states, old, embedder, report)
        phases["embed"] = time.perf_counter() - t
        t = time.perf_counter()
        report("write", 0, 1)
        lexical = LexicalIndex.build(chunks, _lexical_documents(chunks, documents))
        phases["lexical"] = time.perf_counter() - t
        t = time.perf_counter()
        generation = max(store.latest_generation(), old.manifest.generation if old else 0) + 1
        manifest = Manifest(
            format_version=FORMAT_VERSION,
            chunker_version=CHUNKER_VERSION,
            model_id=embedder.model_id,
            lexical_version=LEXICAL_VERSION,
            generation=generation,
            root=str(root),
            dim=int(vectors.shape[1]),
            files=len(files),
            chunks=len(chunks),
            updated_at=time.time(),
        )
        store.publish(manifest, files, chunks, vectors, lexical)
        report("write", 1, 1)
        phases["write"] = time.perf_counter() - t
        stats.generation, stats.changed = generation, True
        stats.files, stats.chunks, stats.chunks_embedded = len(files), len(chunks), embedded
        stats.seconds = time.perf_counter() - started
        stats.phase_seconds = phases
        return stats


def _cache_exclude(root: Path, config: EngineConfig) -> tuple[str, ...]:
    """A glob keeping the cache dir out of the index when it is configured inside the root:
    otherwise every update would index its own output and never settle."""
    try:
        inside = Path(config.cache_dir).resolve().relative_to(root)
    except ValueError:
        return ()
    return (f"/{inside.as_posix()}/**",) if inside.parts else ()


def _compatible(store: IndexStore, model_id: str, root: Path) -> tuple[Snapshot | None, str | None]:
    """The live generation if it can be updated in place, else None and why not."""
    try:
        old = store.load()
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
    if manifest.root != str(root):
        return f"index directory belonged to {manifest.root}"
    return None


def _classify(
    discovered: list[DiscoveredFile], old: Snapshot | None, report: Progress, documents: DocumentCache, max_size: int
) -> tuple[list[_FileState], UpdateStats]:
    """Decide per file: reuse (unchanged or touched) or re-chunk (added or modified; read no
    further than `max_size` bytes). New chunks' lexical documents go into `documents`."""
    stats = UpdateStats(generation=0, changed=False, rebuilt=False, reason=None, files=0, chunks=0)
    old_files = old.files if old else {}
    states: list[_FileState | None] = []
    jobs: list[ChunkJob] = []
    pending: list[int] = []
    for f in discovered:
        entry = old_files.get(f.path)
        if entry is not None and entry.mtime_ns == f.mtime_ns and entry.size == f.size:
            states.append(_FileState(f, entry.digest, entry, None))
            continue
        pending.append(len(states))
        states.append(None)
        jobs.append(ChunkJob(f, entry.digest if entry else None))
    chunked = chunk_files(jobs, max_size, lambda d, t: report("chunk", d, t))
    for slot, job, result in zip(pending, jobs, chunked, strict=True):
        if result is None:
            continue  # vanished, unreadable or binary after all: not indexed
        f = discovered[slot]
        entry = old_files.get(f.path)
        if result.chunks is None:
            assert entry is not None
            states[slot] = _FileState(f, result.digest, entry, None)
            stats.touched += 1
            continue
        states[slot] = _FileState(f, result.digest, None, result.chunks)
        for chunk, doc in zip(result.chunks, result.documents or (), strict=True):
            documents[(chunk.path, chunk.content_hash)] = doc
        if job.known_digest is None:
            stats.added += 1
        else:
            stats.modified += 1
    return [s for s in states if s is not None], stats


def _assemble(
    states: list[_FileState], old: Snapshot | None, embedder: Embedder, report: Progress
) -> tuple[list[Chunk], np.ndarray, dict[str, FileEntry], int]:
    """The new chunk list (file order), its vectors and file table. Reused files keep their
    rows; new chunks reuse any old vector with the same embedding text, the rest are
    embedded in batches (each distinct text once)."""
    old_rows = _old_rows_by_text(states, old)
    pending: dict[str, int] = {}  # embedding-text key -> index into `texts`
    texts: list[str] = []
    chunks: list[Chunk] = []
    sources: list[tuple[str, int]] = []  # per chunk: ("old", row) | ("new", text index)
    files: dict[str, FileEntry] = {}
    for s in states:
        first = len(chunks)
        if s.reuse is not None:
            assert old is not None
            rows = range(s.reuse.first, s.reuse.first + s.reuse.count)
            chunks.extend(old.chunks[r] for r in rows)
            sources.extend(("old", r) for r in rows)
        else:
            for c in s.new or ():
                text = chunk_text(c)
                key = content_hash(text)
                chunks.append(c)
                if key in old_rows:
                    sources.append(("old", old_rows[key]))
                    continue
                if key not in pending:
                    pending[key] = len(texts)
                    texts.append(text)
                sources.append(("new", pending[key]))
        files[s.file.path] = FileEntry(s.file.mtime_ns, s.file.size, s.digest, first, len(chunks) - first)
    fresh = _embed(embedder, texts, report)
    if texts:
        dim = fresh.shape[1]
    elif old is not None and old.manifest.dim:
        dim = old.manifest.dim
    else:
        dim = _dim(embedder)
    vectors = np.empty((len(chunks), dim), dtype=np.float32)
    if chunks:
        kinds = np.fromiter((src == "new" for src, _ in sources), dtype=bool, count=len(sources))
        idx = np.fromiter((i for _, i in sources), dtype=np.int64, count=len(sources))
        if (~kinds).any():
            assert old is not None
            vectors[~kinds] = old.vectors[idx[~kinds]]
        if kinds.any():
            vectors[kinds] = fresh[idx[kinds]]
    return chunks, vectors, files, len(texts)


def _old_rows_by_text(states: list[_FileState], old: Snapshot | None) -> dict[str, int]:
    """Old vectors of the files being re-chunked, by embedding-text key: an edit to one
    function leaves its neighbours' chunks identical, and those keep their vectors."""
    if old is None:
        return {}
    rows: dict[str, int] = {}
    for s in states:
        if s.new is None:
            continue
        entry = old.files.get(s.file.path)
        if entry is None:
            continue
        for r in range(entry.first, entry.first + entry.count):
            rows[content_hash(chunk_text(old.chunks[r]))] = r
    return rows


def _embed(embedder: Embedder, texts: list[str], report: Progress) -> np.ndarray:
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    parts = []
    for start in range(0, len(texts), EMBED_BATCH):
        report("embed", start, len(texts))
        parts.append(embedder.embed(texts[start:start + EMBED_BATCH]))
    report("embed", len(texts), len(texts))
    return np.concatenate(parts)


def _lexical_documents(chunks: list[Chunk], cache: DocumentCache) -> list[list[str]]:
    """Each chunk's lexical document, from `cache` where chunking or an earlier update made
    it; `cache` is left holding exactly this generation's documents (it never grows stale)."""
    current: DocumentCache = {}
    docs = []
    for c in chunks:
        key = (c.path, c.content_hash)
        doc = cache.get(key)
        if doc is None:
            doc = lexical_document(c)
        current[key] = doc
        docs.append(doc)
    cache.clear()
    cache.update(current)
    return docs


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
