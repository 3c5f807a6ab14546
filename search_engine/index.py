"""The semantic index of a root as ranking sees it, and the per-process cache of them.

`IndexManager.get(root) -> Index` is what the engine calls before a semantic or hybrid search.
An `Index` is one immutable generation:

    index.chunks      ChunkTable (a Sequence[Chunk], columns memory-mapped), in file order
                      (files sorted by path)
    index.vectors     VectorIndex: int8 codes, sign bits and file vectors (`search_engine.vectors`)
    index.lexical     LexicalIndex over the same chunks (`search_engine.lexical`)
    index.generation  int; grows by one with every update that changes anything
    index.embed_query(text) -> np.ndarray (dim,), normalized, same model as the vectors
    index.memo(key, build)   per-generation cache for structures derived from the index

Opening an index maps its arrays: milliseconds, whatever its size. The first search of a root
with a compatible index on disk uses it at once and checks freshness in a background thread,
so a server restarted on a large tree answers before it has listed the tree. After that,
freshness is checked cheaply: within `refresh_interval_s` of the last check a search only
re-reads the `CURRENT` pointer (another process may have published); past it, `get` runs an
incremental update, which is a file listing and a stat per file when nothing changed, unless
an update of the root is already running, in which case the search uses the live generation
rather than wait for it. That check runs inline for a tree of at most
`INLINE_REFRESH_MAX_FILES` files; a larger tree is checked (and updated) in a background
thread, and the search goes ahead on the live generation, picking up the new one on a later
search. A check is due again only after `CHECK_SPACING` times as long as the last one took,
so a tree whose listing is slow is not listed over and over while an agent searches it. An
agent that edits a file and searches within the interval (or, in a large tree, before the
background update has published) may see the previous generation; that is the price of
single-digit-millisecond warm queries.

Each loaded `Index` pins its generation on disk (`search_engine.index_store`) for as long as
it is referenced: a search running on it keeps it, and dropping the last reference lets the
store reclaim it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np

from search_engine.chunk_jobs import over_budget_warnings
from search_engine.chunk_table import ChunkTable
from search_engine.config import EngineConfig
from search_engine.embeddings import Embedder, embedder_for
from search_engine.errors import IndexDamagedError, IndexStoreError, SearchError
from search_engine.index_store import IndexStore, Snapshot, index_dir
from search_engine.indexing import DEFAULT_LOCK_TIMEOUT_S, Progress, UpdateStats, stale_reason, update_index
from search_engine.lexical import LexicalIndex
from search_engine.private_dir import check_cache_dir
from search_engine.vectors import VectorIndex

T = TypeVar("T")
log = logging.getLogger(__name__)

DEFAULT_REFRESH_INTERVAL_S = 2.0
# Trees up to this many indexed files are checked for freshness inline when due (the walk
# costs tens of milliseconds, and the search then sees an edit made just before it); larger
# ones in a background thread while the search uses the live generation (at 8x sympy,
# 12,500 files, a check that finds nothing changed takes 0.25 s warm and seconds with a cold
# page cache). Counted, not timed, so which way a tree goes never depends on the machine's load.
INLINE_REFRESH_MAX_FILES = 2000
# The next freshness check waits at least this many times as long as the last one took: a
# check of a 12k-file tree costs 0.25 s of CPU warm (more on a slow disk or a busy machine),
# which every 2 s would be an eighth of a core spent on an agent's searches; spaced by its
# own cost it stays under ~10% of one whatever the tree.
CHECK_SPACING = 10.0


@dataclass(eq=False)
class Index:
    """One loaded, immutable index generation of `root` (see the module docstring)."""

    root: Path
    generation: int
    model_id: str
    chunks: ChunkTable
    vectors: VectorIndex
    lexical: LexicalIndex
    updated_at: float
    embedder: Embedder = field(repr=False)
    snapshot: Snapshot | None = field(default=None, repr=False)  # holds the generation's pin
    _memo: dict[str, Any] = field(default_factory=dict, repr=False)
    _memo_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def embed_query(self, text: str) -> np.ndarray:
        """The query's vector, from the model that embedded the chunks."""
        query: np.ndarray = self.embedder.embed([text])[0]
        return query

    def memo(self, key: str, build: Callable[[], T]) -> T:
        """`build()` once per generation and key: ranking keeps derived structures (file
        tables, symbol maps) here so they live exactly as long as the data they derive from."""
        with self._memo_lock:
            if key not in self._memo:
                self._memo[key] = build()
            # Each key is only ever built by callers passing the same kind of `build`.
            return cast("T", self._memo[key])


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
    over_budget: tuple[str, ...] = ()  # files indexed as plain text: their parse was over budget

    @property
    def warnings(self) -> list[str]:
        """What an agent or a person should know of this index: the files it holds as plain
        text, and why."""
        return over_budget_warnings(self.over_budget)


@dataclass(slots=True)
class _Entry:
    index: Index
    directory_name: str
    checked_at: float
    check_s: float = 0.0  # how long the freshness check behind this entry took


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
        inline_refresh_max_files: int = INLINE_REFRESH_MAX_FILES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        check_cache_dir(config.cache_dir)  # every index under it is read back as ours
        self.config = config
        self._clock = clock
        self.embedder = embedder if embedder is not None else embedder_for(config)
        self.refresh_interval_s = refresh_interval_s
        self.inline_refresh_max_files = inline_refresh_max_files
        self.lock_timeout_s = lock_timeout_s
        self._entries: dict[Path, _Entry] = {}
        self._root_locks: dict[Path, threading.Lock] = {}
        self._refreshers: dict[Path, threading.Thread] = {}
        self._guard = threading.Lock()

    def store(self, root: Path) -> IndexStore:
        return IndexStore(index_dir(self.config.cache_dir, Path(root)))

    def update(self, root: Path, *, full: bool = False, progress: Progress | None = None) -> UpdateStats:
        """Bring the on-disk index of `root` up to date now."""
        root = Path(root).resolve()
        store = self.store(root)
        with self._root_lock(root):
            stats = self._update(root, store, full=full, progress=progress)
            with self._guard:
                previous = self._entries.get(root)
            entry = self._load(root, store, previous)  # just checked: no background check due
            with self._guard:
                self._entries[root] = entry
            return stats

    def repair(self, root: Path, damage: IndexDamagedError) -> None:
        """Rebuild the index of `root` after a search met `damage`, unless the generation it
        is in is no longer live (another search, a background check or another process got
        there first: four searches meeting one damaged part rebuilt four times): then just
        load the live one."""
        root = Path(root).resolve()
        store = self.store(root)
        with self._root_lock(root):
            live = store.current_name()
            if live is None or (store.directory / live) in (damage.where, *damage.where.parents):
                self._update(root, store, full=True)
            entry = self._load(root, store, None)
            with self._guard:
                self._entries[root] = entry

    def open(self, root: Path) -> bool:
        """Load the index of `root` already on disk, without checking it against the tree;
        False if there is none this process can use (none yet, another model or format)."""
        root = Path(root).resolve()
        with self._guard:
            if root in self._entries:
                return True
        entry = self._open_existing(root, self.store(root))
        if entry is None:
            return False
        with self._guard:
            self._entries.setdefault(root, entry)
        return True

    def get(self, root: Path) -> Index:
        """The current index of `root`: the one on disk at once when there is a usable one
        (its freshness checked in the background the first time, inline when due later),
        otherwise built first."""
        root = Path(root).resolve()
        store = self.store(root)
        with self._guard:
            entry = self._entries.get(root)
        opened = entry is None and self.open(root)
        if opened:
            self._refresh_in_background(root)
            with self._guard:
                entry = self._entries[root]
        if entry is None:
            with self._root_lock(root):
                self._update(root, store)
                entry = self._load(root, store, None)
        elif not opened and self._clock() - entry.checked_at >= max(
            self.refresh_interval_s, CHECK_SPACING * entry.check_s
        ):
            if entry.index.snapshot is not None and len(entry.index.snapshot.files) > self.inline_refresh_max_files:
                self._refresh_in_background(root)  # a walk of a large tree: never on a query's time
            else:
                lock = self._root_lock(root)
                if lock.acquire(blocking=False):  # else an update is running: use the live generation
                    try:
                        took = self._timed_update(root, store)
                    finally:
                        lock.release()
                    entry = replace(self._load(root, store, entry), check_s=took)
        if store.current_name() != entry.directory_name:
            entry = self._load(root, store, entry)
        with self._guard:  # a background refresh may have stored a newer entry meanwhile
            stored = self._entries.get(root)
            if stored is None or stored.checked_at <= entry.checked_at:
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
            over_budget = tuple(store.read_over_budget())
        except IndexStoreError as exc:
            return IndexStatus(
                str(root),
                str(store.directory),
                True,
                configured_model_id=configured,
                size_bytes=store.size_on_disk(),
                stale_reason=str(exc),
            )
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
            over_budget=over_budget,
        )

    def _update(
        self, root: Path, store: IndexStore, *, full: bool = False, progress: Progress | None = None
    ) -> UpdateStats:
        """Call with the root's lock held."""
        return update_index(
            root,
            store,
            self.embedder,
            self.config,
            full=full,
            progress=progress,
            lock_timeout_s=self.lock_timeout_s,
        )

    def _timed_update(self, root: Path, store: IndexStore) -> float:
        """A freshness check (an incremental update); returns how long it took by the clock."""
        started = self._clock()
        self._update(root, store)
        return self._clock() - started

    def _open_existing(self, root: Path, store: IndexStore) -> _Entry | None:
        try:
            manifest = store.read_manifest()
            if manifest is None or stale_reason(manifest, self.embedder.model_id, root) is not None:
                return None
            return self._load(root, store, None)
        except IndexStoreError as exc:
            log.info("not using the index on disk for %s: %s", root, exc)
            return None

    def _refresh_in_background(self, root: Path) -> None:
        """Run the freshness check of an index just opened from disk in a thread; the search
        that opened it goes ahead on it meanwhile."""

        def run() -> None:
            try:
                with self._root_lock(root):
                    store = self.store(root)
                    took = self._timed_update(root, store)
                    with self._guard:
                        previous = self._entries.get(root)
                    entry = replace(self._load(root, store, previous), check_s=took)
                    with self._guard:
                        self._entries[root] = entry
            except (SearchError, OSError) as exc:
                log.warning("checking the index of %s for changes failed: %s", root, exc)

        with self._guard:
            running = self._refreshers.get(root)
            if running is not None and running.is_alive():
                return
            thread = self._refreshers[root] = threading.Thread(target=run, name="codepager-refresh", daemon=True)
        thread.start()

    def _load(self, root: Path, store: IndexStore, previous: _Entry | None) -> _Entry:
        """Open the live generation (reusing the loaded one if it is still live). A writer
        may sweep a generation between reading `CURRENT` and opening it: retry then."""
        for _attempt in range(3):
            name = store.current_name()
            if previous is not None and name == previous.directory_name:
                return _Entry(previous.index, name, self._clock())
            try:
                snapshot = store.load()
                if snapshot is None:
                    raise IndexStoreError(f"no index for {root} after updating it; check {store.directory}")
                return _Entry(self._open(root, snapshot), snapshot.directory.name, self._clock())
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
            snapshot=snapshot,
        )

    def _root_lock(self, root: Path) -> threading.Lock:
        with self._guard:
            return self._root_locks.setdefault(root, threading.Lock())
