"""The semantic index of a root as ranking sees it, and the per-process cache of them.

`IndexManager.get(root) -> Index` is what the engine calls before a semantic or hybrid search.
An `Index` is one immutable generation:

    index.chunks      ChunkTable (a Sequence[Chunk], columns memory-mapped), in file order
                      (files sorted by path)
    index.vectors     VectorIndex: int8 codes, sign bits and file vectors (`search_engine.index.vectors`)
    index.lexical     LexicalIndex over the same chunks (`search_engine.ranking.lexical`)
    index.generation  int; grows by one with every update that changes anything
    index.embed_query(text) -> np.ndarray (dim,), normalized, same model as the vectors
    index.memo(key, build)   per-generation cache for structures derived from the index

Opening an index maps its arrays: milliseconds, whatever its size. Every search first settles
the root (`search_engine.live.read_your_writes`): with file events it makes sure every change completed before the
call is recorded, and when something changed it folds the changes into a new generation (an
incremental update) in a background thread. A few changed files are taken live meanwhile
(`search_engine.live.layer`, `layer(root)`); more are waited for up to `fresh_wait_s`, past
which the search answers from the loaded generation with the changed files masked out, and
says so. The first
search of a root with a compatible index on disk uses it at once while the first full check
runs (answering `unverified` if it takes longer than the wait), so a server restarted on a large
tree answers before it has listed the tree.

Each loaded `Index` pins its generation on disk (`search_engine.index.store`) for as long as
it is referenced: a search running on it keeps it, and dropping the last reference lets the
store reclaim it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np

from infra import UnsafeDirectoryError, check_cache_dir
from search_engine.chunking.jobs import KeptWorker, over_budget_warnings
from search_engine.config import DEFAULT_FRESH_WAIT_S, EngineConfig
from search_engine.embedding.embedder import Embedder, embedder_for
from search_engine.errors import IndexDamagedError, IndexStoreError, UnsafeCacheDirError
from search_engine.index.chunk_table import ChunkTable
from search_engine.index.store import IndexStore, Snapshot, index_dir
from search_engine.index.update import DEFAULT_LOCK_TIMEOUT_S, Progress, UpdateStats, stale_reason, update_index
from search_engine.index.vectors import VectorIndex
from search_engine.live.layer import MAX_LIVE_FILES, LiveLayer
from search_engine.live.read_your_writes import LiveRoot, Settled
from search_engine.live.watcher import ChangeLog, WatchUnavailable, watch
from search_engine.ranking.lexical import LexicalIndex
from search_engine.ranking.search import Ranker

T = TypeVar("T")
log = logging.getLogger(__name__)


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

    def memoized(self, key: str) -> object | None:
        """What `memo` keeps under `key`, None if nothing was built yet."""
        with self._memo_lock:
            return self._memo.get(key)


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
    change_detection: str | None = None  # "events" or "polling" once a search watches the root
    change_detection_reason: str | None = None  # why polling
    listing: tuple[str, ...] = ()  # what the last listing of the tree in this process said of it

    @property
    def warnings(self) -> list[str]:
        """What an agent or a person should know of this index: the files it holds as plain
        text, and why; what its last listing said of the tree (ignore files not read, files the
        ignore rules or the minified excludes left out)."""
        return [*over_budget_warnings(self.over_budget), *self.listing]


@dataclass(slots=True)
class _Entry:
    index: Index
    directory_name: str


class IndexManager:
    """Keeps one warm `Index` per root for this process, caught up with the files.

    One embedder serves every root (one model in memory). Updates of a root are serialised
    in-process by a per-root lock and across processes by the store's file lock. `watch`
    False finds changes by listing the tree on every search instead of by file events."""

    def __init__(
        self,
        config: EngineConfig,
        embedder: Embedder | None = None,
        *,
        watch: bool = True,
        fresh_wait_s: float = DEFAULT_FRESH_WAIT_S,
        lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        try:
            check_cache_dir(config.cache_dir)  # every index under it is read back as ours
        except UnsafeDirectoryError as exc:
            raise UnsafeCacheDirError(str(exc)) from exc
        self.config = config
        self._clock = clock
        self.embedder = embedder if embedder is not None else embedder_for(config)
        self.watch = watch
        self.fresh_wait_s = fresh_wait_s
        self.lock_timeout_s = lock_timeout_s
        self._entries: dict[Path, _Entry] = {}
        self._live: dict[Path, LiveRoot] = {}
        self._layers: dict[Path, LiveLayer] = {}
        # The live layers' chunking worker, forked once a root is watched (`layer`).
        self._worker = KeptWorker()
        self._root_locks: dict[Path, threading.Lock] = {}
        self._stores: dict[Path, IndexStore] = {}
        self._said: dict[Path, tuple[list[str], list[str]]] = {}
        #: An absolute root as given -> its resolution and the (device, inode) both named then.
        self._resolved: dict[str, tuple[Path, tuple[int, int]]] = {}
        self._guard = threading.Lock()

    def store(self, root: Path) -> IndexStore:
        """The on-disk store of `root`'s index (`root` resolved, as every caller has it; kept
        per root: `index_dir` resolves the path again and hashes it, a tenth of a millisecond
        of every warm search)."""
        with self._guard:
            store = self._stores.get(root)
        if store is None:
            store = IndexStore(index_dir(self.config.cache_dir, Path(root)))
            with self._guard:
                self._stores[root] = store
        return store

    def update(self, root: Path, *, full: bool = False, progress: Progress | None = None) -> UpdateStats:
        """Bring the on-disk index of `root` up to date now."""
        root = Path(root).resolve()
        store = self.store(root)
        live = self._live_root(root)
        covered = live.snapshot()
        with self._root_lock(root):
            stats = self._update(root, store, full=full, progress=progress)
            self._store_entry(root, self._load(root, store, self._entry(root)))
        live.folded_through(covered)
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
            self._store_entry(root, self._load(root, store, None))

    def open(self, root: Path) -> bool:
        """Load the index of `root` already on disk, without checking it against the tree;
        False if there is none this process can use (none yet, another model or format)."""
        root = Path(root).resolve()
        if self._entry(root) is not None:
            return True
        entry = self._open_existing(root, self.store(root))
        if entry is None:
            return False
        with self._guard:
            self._entries.setdefault(root, entry)
        return True

    def get(self, root: Path) -> Index:
        """The index of `root` caught up with its files as far as `current` could."""
        return self.current(root)[0]

    def current(self, root: Path) -> tuple[Index, Settled]:
        """The index a search of `root` answers from, and what state of the files it reflects:
        every change completed before this call when `current` (see `search_engine.live.read_your_writes`).
        With no usable index on disk, it is built first (that wait is not bounded: there is
        nothing to answer from)."""
        root = self._resolve(root)
        store = self.store(root)
        live = self._live_root(root)
        if self._entry(root) is None and not self.open(root):
            covered = live.snapshot()
            with self._root_lock(root):
                if self._entry(root) is None:
                    self._update(root, store)
                    self._store_entry(root, self._load(root, store, None))
            live.folded_through(covered)
        if live.watcher is not None:  # the next edit is taken live: its worker is forked now
            self._worker.start()
        freshness = live.settle()
        if not freshness.live:
            with self._guard:
                layer = self._layers.get(root)
            if layer is not None:
                layer.clear()  # it held the previous generation
        entry = self._entry(root)
        assert entry is not None
        # Another process published meanwhile: load its generation. Not while this process's
        # own update holds the root's lock: the generation on disk is the one it is publishing,
        # which it loads and stores itself, its ranking structures made on its thread (a search
        # that loaded it too paid seconds for a second copy of them at 8x sympy). The loaded one
        # is as safe meanwhile: `freshness` masks or takes live what it does not hold.
        if not store.still_names(entry.directory_name) and not self._root_lock(root).locked():
            entry = self._store_entry(root, self._load(root, store, self._entry(root)))
        return entry.index, freshness

    def _resolve(self, root: Path) -> Path:
        """`root` resolved, as every key here is. Resolving costs an `lstat` per component
        (~0.05 ms of every warm search), so an absolute root's resolution is remembered and
        reused while the root as given and that resolution still name the very directory they
        named then: two `stat`s. A link re-pointed, or the directory moved, fails that check
        and the root is resolved again."""
        given = str(root)
        try:
            now = os.stat(given)
        except OSError:
            return Path(root).resolve()
        ident = (now.st_dev, now.st_ino)
        with self._guard:
            known = self._resolved.get(given)
        if known is not None and known[1] == ident:
            try:
                then = os.stat(known[0])
            except OSError:
                pass
            else:
                if (then.st_dev, then.st_ino) == ident:
                    return known[0]
        resolved = Path(root).resolve()
        if os.path.isabs(given):
            with self._guard:
                self._resolved[given] = (resolved, ident)  # the stat before the resolution: a race fails the next check
        return resolved

    def said(self, root: Path) -> tuple[list[str], list[str]]:
        """What the last listing of `root`'s tree by this process said of it: warnings (ignore
        files not read) and notices (files ignore rules or the minified excludes left out), as
        `Discovery` has them. Said with every ranked answer, since the index holds only what the
        listing let in. Empty until this process has listed the tree (an index opened from disk
        is listed by its first freshness check, which starts at once). `root` resolved, as
        `Index.root` has it: resolving it again cost a few system calls per search."""
        with self._guard:
            warnings, notices = self._said.get(root, ([], []))
        return list(warnings), list(notices)

    def generation(self, root: Path) -> int:
        """The generation a search of `root` would see now (caught up first)."""
        return self.get(root).generation

    def detection(self, root: Path) -> tuple[str, str | None]:
        """How changes to `root` are found (`events` or `polling`) and, when polling, why."""
        live = self._live_root(Path(root).resolve())
        return live.detection, live.poll_reason if live.watcher is None else live.watcher.failure

    def wait_idle(self, root: Path, timeout_s: float | None = None) -> bool:
        """Wait for a running fold of `root` to end (tests, benchmarks); False on timeout."""
        with self._guard:
            live = self._live.get(Path(root).resolve())
        return live is None or live.wait_idle(timeout_s)

    def close(self) -> None:
        """Stop watching every root."""
        with self._guard:
            lives, self._live = list(self._live.values()), {}
        for live in lives:
            live.close()
        self._worker.close()

    def status(self, root: Path) -> IndexStatus:
        root = Path(root).resolve()
        store = self.store(root)
        with self._guard:
            live = self._live.get(root)
        detection, reason = self.detection(root) if live is not None else (None, None)
        configured = self.embedder.model_id
        status = partial(
            IndexStatus,
            root=str(root),
            directory=str(store.directory),
            configured_model_id=configured,
            change_detection=detection,
            change_detection_reason=reason,
        )
        try:
            manifest = store.read_manifest()
            over_budget = tuple(store.read_over_budget())
        except IndexStoreError as exc:
            return status(exists=True, size_bytes=store.size_on_disk(), stale_reason=str(exc))
        if manifest is None:
            return status(exists=False)
        return status(
            exists=True,
            generation=manifest.generation,
            files=manifest.files,
            chunks=manifest.chunks,
            model_id=manifest.model_id,
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
        stats = update_index(
            root,
            store,
            self.embedder,
            self.config,
            full=full,
            progress=progress,
            lock_timeout_s=self.lock_timeout_s,
        )
        with self._guard:
            self._said[root] = (stats.warnings, stats.notices)
        return stats

    def _open_existing(self, root: Path, store: IndexStore) -> _Entry | None:
        try:
            manifest = store.read_manifest()
            if manifest is None or stale_reason(manifest, self.embedder.model_id, root) is not None:
                return None
            return self._load(root, store, None)
        except IndexStoreError as exc:
            log.info("not using the index on disk for %s: %s", root, exc)
            return None

    def _entry(self, root: Path) -> _Entry | None:
        with self._guard:
            return self._entries.get(root)

    def _store_entry(self, root: Path, entry: _Entry) -> _Entry:
        with self._guard:
            self._entries[root] = entry
        return entry

    def _fold(self, root: Path) -> None:
        """Bring the index of `root` up to its files as they are now (the fold of
        `LiveRoot`, on its thread)."""
        store = self.store(root)
        with self._root_lock(root):
            # An update made while this fold waited for the lock may have brought in all it was
            # started for: the first search of a server answers while the server's start-up
            # check (`update`) walks the tree, and the fold it started then walked the whole
            # tree again (a second of CPU at 8x the stdlib, while the first searches ran).
            if not self._live_root(root).round_covered():
                self._update(root, store)
            previous = self._entry(root)
            entry = self._load(root, store, previous)
            # Ranking's structures are made here, on the fold's thread, not by the next search:
            # the corpus, and whatever the previous generation's searches had made of theirs.
            ranker = entry.index.memo("ranker", lambda: Ranker(entry.index, self.config))
            if previous is not None and previous is not entry:
                before = previous.index.memoized("ranker")
                if isinstance(before, Ranker):
                    ranker.corpus.warm_like(before.corpus)
            ranker.prepare()
            self._store_entry(root, entry)

    def _live_root(self, root: Path) -> LiveRoot:
        """The root's change tracking, started (watcher first) before anything reads the tree."""
        with self._guard:
            live = self._live.get(root)
            if live is not None:
                return live
            watcher: ChangeLog | None = None
            reason: str | None = "index.watch is off"
            if self.watch:
                try:
                    watcher = watch(root, self.config.cache_dir, ignored=self.config.cache_dir, clock=self._clock)
                    reason = None
                except WatchUnavailable as exc:
                    reason = str(exc)
                    log.warning("%s; finding changes by listing the tree on every search", reason)
            live = self._live[root] = LiveRoot(
                lambda: self._fold(root),
                watcher,
                poll_reason=reason,
                wait_s=self.fresh_wait_s,
                live_limit=MAX_LIVE_FILES,
                clock=self._clock,
            )
            return live

    def layer(self, root: Path) -> LiveLayer:
        """The live layer of `root` (`search_engine.live.layer`)."""
        root = Path(root).resolve()
        with self._guard:
            layer = self._layers.get(root)
            if layer is None:
                layer = self._layers[root] = LiveLayer(root, self.embedder, self.config, self._worker)
            return layer

    def _load(self, root: Path, store: IndexStore, previous: _Entry | None) -> _Entry:
        """Open the live generation (reusing the loaded one if it is still live). A writer
        may sweep a generation between reading `CURRENT` and opening it: retry then."""
        for _attempt in range(3):
            name = store.current_name()
            if previous is not None and name == previous.directory_name:
                return previous
            try:
                snapshot = store.load()
                if snapshot is None:
                    raise IndexStoreError(f"no index for {root} after updating it; check {store.directory}")
                return _Entry(self._open(root, snapshot), snapshot.directory.name)
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
