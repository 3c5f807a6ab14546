"""The semantic index of a root as ranking sees it, and the per-process cache of them.

`IndexManager.get(root) -> Index` is what the engine calls before a semantic or hybrid search.
An `Index` is one immutable generation:

    index.chunks      list[Chunk], in file order (files sorted by path)
    index.vectors     np.ndarray (len(chunks), dim) float32, L2-normalized, memory-mapped
    index.lexical     LexicalIndex over the same chunks (`search_engine.lexical`)
    index.generation  int; grows by one with every update that changes anything
    index.embed_query(text) -> np.ndarray (dim,), normalized, same model as the vectors
    index.memo(key, build)   per-generation cache for structures derived from the index

Freshness is checked cheaply: within `refresh_interval_s` of the last check a search only
re-reads the `CURRENT` pointer (another process may have published); past it, `get` runs an
incremental update, which is a file listing and a stat per file when nothing changed. An agent
that edits a file and searches within the interval may see the previous generation; the
interval is the price of single-digit-millisecond warm queries.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from search_engine.chunks import Chunk
from search_engine.config import EngineConfig
from search_engine.embeddings import Embedder, embedder_for
from search_engine.errors import IndexStoreError
from search_engine.index_store import IndexStore, Snapshot, index_dir
from search_engine.indexing import (
    DEFAULT_LOCK_TIMEOUT_S,
    DocumentCache,
    Progress,
    UpdateStats,
    stale_reason,
    update_index,
)
from search_engine.lexical import LexicalIndex

T = TypeVar("T")

DEFAULT_REFRESH_INTERVAL_S = 2.0


@dataclass(eq=False)
class Index:
    """One loaded, immutable index generation of `root` (see the module docstring)."""

    root: Path
    generation: int
    model_id: str
    chunks: list[Chunk]
    vectors: np.ndarray
    lexical: LexicalIndex
    updated_at: float
    embedder: Embedder = field(repr=False)
    _memo: dict[str, Any] = field(default_factory=dict, repr=False)
    _memo_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def embed_query(self, text: str) -> np.ndarray:
        """The query's vector, from the model that embedded the chunks."""
        return self.embedder.embed([text])[0]

    def memo(self, key: str, build: Callable[[], T]) -> T:
        """`build()` once per generation and key: ranking keeps derived structures (file
        tables, symbol maps) here so they live exactly as long as the data they derive from."""
        with self._memo_lock:
            if key not in self._memo:
                self._memo[key] = build()
            return self._memo[key]


@dataclass(frozen=True, slots=True)
class IndexStatus:
    """What `codepager index --status` reports; reading it loads no model."""

    root: str
    directory: str
    exists: bool
    generation: int = 0
    files: int = 0
    chunks: int = 0
    model_id: str | None = None
    configured_model_id: str | None = None
    dim: int = 0
    size_bytes: int = 0
    updated_at: float | None = None
    stale_reason: str | None = None


@dataclass(slots=True)
class _Entry:
    index: Index
    directory_name: str
    checked_at: float


class IndexManager:
    """Keeps one warm `Index` per root for this process and updates it when due.

    One embedder serves every root (one model in memory). Updates of a root are serialised
    in-process by a per-root lock and across processes by the store's file lock."""

    def __init__(
        self,
        config: EngineConfig,
        embedder: Embedder | None = None,
        *,
        refresh_interval_s: float = DEFAULT_REFRESH_INTERVAL_S,
        lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
    ) -> None:
        self.config = config
        self.embedder = embedder if embedder is not None else embedder_for(config)
        self.refresh_interval_s = refresh_interval_s
        self.lock_timeout_s = lock_timeout_s
        self._entries: dict[Path, _Entry] = {}
        self._documents: dict[Path, DocumentCache] = {}
        self._root_locks: dict[Path, threading.Lock] = {}
        self._guard = threading.Lock()

    def store(self, root: Path) -> IndexStore:
        return IndexStore(index_dir(self.config.cache_dir, Path(root)))

    def update(self, root: Path, *, full: bool = False, progress: Progress | None = None) -> UpdateStats:
        """Bring the on-disk index of `root` up to date now."""
        root = Path(root).resolve()
        with self._root_lock(root):
            return self._update(root, self.store(root), full=full, progress=progress)

    def get(self, root: Path) -> Index:
        """The current index of `root`, building or updating it first when due."""
        root = Path(root).resolve()
        store = self.store(root)
        with self._root_lock(root):
            entry = self._entries.get(root)
            fresh = entry is not None and time.monotonic() - entry.checked_at < self.refresh_interval_s
            if entry is not None and fresh and store.current_name() == entry.directory_name:
                return entry.index
            if not fresh:
                self._update(root, store)
            entry = self._load(root, store, entry)
            self._entries[root] = entry
            return entry.index

    def generation(self, root: Path) -> int:
        """The generation a search of `root` would see now (updating first when due)."""
        return self.get(root).generation

    def status(self, root: Path) -> IndexStatus:
        root = Path(root).resolve()
        store = self.store(root)
        configured = self.embedder.model_id
        try:
            manifest = store.read_manifest()
        except IndexStoreError as exc:
            return IndexStatus(str(root), str(store.directory), True, configured_model_id=configured,
                               size_bytes=store.size_on_disk(), stale_reason=str(exc))
        if manifest is None:
            return IndexStatus(str(root), str(store.directory), False, configured_model_id=configured)
        return IndexStatus(
            root=str(root),
            directory=str(store.directory),
            exists=True,
            generation=manifest.generation,
            files=manifest.files,
            chunks=manifest.chunks,
            model_id=manifest.model_id,
            configured_model_id=configured,
            dim=manifest.dim,
            size_bytes=store.size_on_disk(),
            updated_at=manifest.updated_at,
            stale_reason=stale_reason(manifest, configured, root),
        )

    def _update(self, root: Path, store: IndexStore, *, full: bool = False, progress: Progress | None = None) -> UpdateStats:
        """Call with the root's lock held."""
        return update_index(
            root, store, self.embedder, self.config, full=full, progress=progress,
            lock_timeout_s=self.lock_timeout_s, documents=self._documents.setdefault(root, {}),
        )

    def _load(self, root: Path, store: IndexStore, previous: _Entry | None) -> _Entry:
        """Open the live generation (reusing the loaded one if it is still live). A writer
        may sweep a generation between reading `CURRENT` and opening it: retry then."""
        for _attempt in range(3):
            name = store.current_name()
            if previous is not None and name == previous.directory_name:
                return _Entry(previous.index, name, time.monotonic())
            try:
                snapshot = store.load()
                if snapshot is None:
                    raise IndexStoreError(f"no index for {root} after updating it; check {store.directory}")
                return _Entry(self._open(root, snapshot), snapshot.directory.name, time.monotonic())
            except IndexStoreError:
                if store.current_name() != name:
                    continue  # superseded while we read it
                raise
        raise IndexStoreError(f"the index of {root} kept changing while being opened; try again")

    def _open(self, root: Path, snapshot: Snapshot) -> Index:
        return Index(
            root=root,
            generation=snapshot.manifest.generation,
            model_id=snapshot.manifest.model_id,
            chunks=snapshot.chunks,
            vectors=snapshot.vectors,
            lexical=snapshot.lexical(),
            updated_at=snapshot.manifest.updated_at,
            embedder=self.embedder,
        )

    def _root_lock(self, root: Path) -> threading.Lock:
        with self._guard:
            return self._root_locks.setdefault(root, threading.Lock())
