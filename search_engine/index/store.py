"""The on-disk layout of one root's index, and the only code that reads or writes it.

    <cache_dir>/indexes/<sha256(root)[:16]>/
        ROOT                  the indexed root, for people looking at the cache
        CURRENT               name of the live generation directory ("gen-00000007")
        write.lock            held by whichever process is updating
        gen-00000007/         one complete index generation, never modified except:
            manifest.json     versions, model, generation, counts, update time
            files.msgpack     per file: mtime_ns, size, content digest, its chunk range
                              (replaced atomically when files were only touched)
            over_budget.msgpack  the files chunked as plain text because their parse
                              outgrew its worker (`search_engine.chunking.workers`); none
                              in a generation written before it
            pins              flock'ed shared by every process that has this generation open
            chunks/           chunk metadata in columns, text compressed per file
                              (`search_engine.index.chunk_table`)
            codes.bin         (chunks, dim) int8 vectors      } `search_engine.index.vectors`,
            scales.bin        (chunks,) float32 row scales    } all memory-mapped
            words.bin         (dim / 64, chunks) uint64 signs }
            file_vectors.npy  (files with chunks, dim) float32: each file's mean vector
            coarse.*.npy      large indexes only: centroids and each chunk's list
                              (`search_engine.index.coarse`, written by `write_coarse`)
            lexical/          the BM25 postings (`search_engine.ranking.lexical`)

Opening a generation maps its arrays and reads the small tables (manifest, file table,
strings, vocabulary): milliseconds, whatever the number of chunks. A generation is written by
`GenerationWriter` one file at a time, so a build holds only the columns and one batch of
chunks in memory, never every chunk at once.

Why generations: a writer builds a complete new directory under a temporary name, renames it
into place and only then swaps `CURRENT` (an atomic rename too). A process killed at any
point leaves `CURRENT` naming a complete generation, and readers never take the writer's lock:
they read `CURRENT`, then a directory whose search data nobody modifies.

Reclaiming: every process holding a generation open holds a shared `flock` on its `pins`
file (`Snapshot.release` or the snapshot's garbage collection drops it; so does the process's
death). A superseded generation is deleted by whoever can take that lock exclusively: the
writer right after publishing, or the last reader to let go of it. A generation someone still
has open is never deleted; one nobody has open does not outlive the next publish or release.
Abandoned temporary directories are swept by the next writer, under the lock.

The index lives in the user cache dir, not inside the searched tree (a cache dir configured
inside it is excluded from indexing).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import weakref
from array import array
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from filelock import FileLock, Timeout

from infra import open_regular_file
from search_engine.chunking.chunk import Chunk
from search_engine.config import INDEXES_DIR
from search_engine.errors import IndexDamagedError, IndexStoreError, reading
from search_engine.index import coarse
from search_engine.index.arrays import load_array, mapped
from search_engine.index.chunk_table import ChunkTable, ChunkTableWriter, text_key
from search_engine.index.packed import Natural, pack, unpack
from search_engine.index.postings_merge import merge
from search_engine.index.vectors import WORD_BITS, VectorIndex, empty, quantize
from search_engine.ranking.lexical import LexicalBuilder, LexicalIndex, lexical_document

# Bumped whenever anything below changes shape, or what `ranking.symbols.defined_names` extracts (the
# stored definitions of unchanged files are copied across updates): an index in another
# format is rebuilt. 3: main's file kinds, C++ specializations and qualified names.
FORMAT_VERSION = 3

_CURRENT = "CURRENT"
#: A live generation's name as `CURRENT` may give it (never a path: `gen-/../..` led out).
_GENERATION = re.compile(r"gen-[0-9]{8,19}")
_CURRENT_BYTES = 64
#: A manifest is a few hundred bytes.
_MANIFEST_BYTES = 1 << 16
_LOCK = "write.lock"
_GEN_PREFIX = "gen-"
_TMP_PREFIX = ".tmp-"
_MANIFEST = "manifest.json"
_FILES = "files.msgpack"
_OVER_BUDGET = "over_budget.msgpack"
#: What `IndexStore.read_over_budget` reads at most: each name in it cost a parse to the limit.
_OVER_BUDGET_BYTES = 1 << 24
_PINS = "pins"
_CHUNKS = "chunks"
_CODES, _SCALES, _WORDS = "codes.bin", "scales.bin", "words.bin"
_FILE_VECTORS = "file_vectors.npy"
_LEXICAL = "lexical"


def index_dir(cache_dir: Path, root: Path) -> Path:
    """Where the index of `root` lives: a digest of its resolved path, so two checkouts of
    the same project never share an index."""
    digest = hashlib.sha256(str(Path(root).resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return Path(cache_dir) / INDEXES_DIR / digest


@dataclass(frozen=True, slots=True)
class FileEntry:
    """What the index knows of one file: enough to tell it unchanged without reading it
    (mtime_ns, size), to tell a touched file from an edited one (digest), and where its
    chunks sit in the chunk list (first, count)."""

    mtime_ns: int
    size: int
    digest: str
    first: int
    count: int


@dataclass(frozen=True, slots=True)
class Manifest:
    format_version: int
    chunker_version: str
    model_id: str
    lexical_version: int
    generation: int
    root: str
    dim: int
    files: int
    chunks: int
    updated_at: float


class _Pin:
    """A shared flock on a generation's `pins` file, held while the generation is open.
    Released explicitly or when garbage collected; either way the store then reclaims what
    nobody holds any more."""

    def __init__(self, directory: Path) -> None:
        fd = os.open(directory / _PINS, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise IndexStoreError(f"index generation {directory.name} is being reclaimed") from None
        if not (directory / _PINS).exists():  # reclaimed between our open and our lock
            os.close(fd)
            raise IndexStoreError(f"index generation {directory.name} was reclaimed while being opened")
        self._release = weakref.finalize(self, _unpin, fd, directory.parent)

    def release(self) -> None:
        self._release()


def _unpin(fd: int, store_dir: Path) -> None:
    os.close(fd)
    with contextlib.suppress(OSError):  # best effort: the next publish or release sweeps again
        IndexStore(store_dir).reclaim()


@dataclass(eq=False)
class Snapshot:
    """One generation, open: arrays memory-mapped, small tables in memory, pinned until
    `release` (or until it is garbage collected)."""

    directory: Path
    manifest: Manifest
    files: dict[str, FileEntry]
    chunks: ChunkTable
    vectors: VectorIndex
    over_budget: frozenset[str] = frozenset()
    pin: _Pin | None = field(default=None, repr=False)
    _lexical: LexicalIndex | None = field(default=None, repr=False)

    def lexical(self) -> LexicalIndex:
        if self._lexical is None:
            self._lexical = LexicalIndex.load(self.directory / _LEXICAL)
        return self._lexical

    def release(self) -> None:
        """Unpin: the generation may be deleted once superseded and nobody else holds it."""
        if self.pin is not None:
            self.pin.release()


class IndexStore:
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        #: `CURRENT`'s identity (`_stamp`) when `still_names` last read it, and what it named.
        self._seen: tuple[tuple[int, ...], str | None] | None = None

    def lock(self, timeout_s: float) -> FileLock:
        """The writers' lock (readers never take it). Timeout -> IndexStoreError on enter."""
        self.directory.mkdir(parents=True, exist_ok=True)
        return _WriterLock(str(self.directory / _LOCK), timeout=timeout_s)

    def current_name(self) -> str | None:
        """The live generation's directory name, or None if there is no index yet. One small
        read: cheap enough to call before every search."""
        try:
            name = _read_small(self.directory / _CURRENT, _CURRENT_BYTES).decode("ascii").strip()
            live = _GENERATION.fullmatch(name) is not None and stat.S_ISDIR(os.lstat(self.directory / name).st_mode)
        except (OSError, ValueError):
            return None
        return name if live else None

    def still_names(self, name: str) -> bool:
        """Whether `CURRENT` still names generation `name` (no other publish since): asked
        before every search, answered by one `lstat` while `CURRENT` is the very file last
        read (a publish replaces it, so its inode changes), else by `current_name`. Opening,
        reading and checking it every time cost ~0.08 ms of a ~2 ms warm search. A generation
        directory removed by hand under an unchanged `CURRENT` is not seen here; the loaded
        generation's files stay mapped and keep answering."""
        stamp = _stamp(self.directory / _CURRENT)  # before the read: a publish between is seen next time
        seen = self._seen
        if stamp is None or seen is None or seen[0] != stamp:
            seen = self._seen = (stamp or (), self.current_name())
        return seen[1] == name

    def read_over_budget(self) -> list[str]:
        """The live generation's files chunked as plain text, their parse over budget (none
        without a generation). IndexStoreError if the list cannot be read."""
        name = self.current_name()
        if name is None:
            return []
        path = self.directory / name / _OVER_BUDGET
        try:
            return _over_budget(path, _OVER_BUDGET_BYTES)
        except (OSError, ValueError) as exc:
            raise IndexStoreError(f"index part {path} is unreadable ({exc}); the next update rebuilds it") from exc

    def read_manifest(self) -> Manifest | None:
        """The live generation's manifest without loading the rest (None: no index yet).
        IndexStoreError if it cannot be read."""
        name = self.current_name()
        if name is None:
            return None
        path = self.directory / name / _MANIFEST
        try:
            return _manifest(json.loads(_read_small(path, _MANIFEST_BYTES)))
        except (OSError, ValueError, TypeError, KeyError, RecursionError) as exc:
            raise IndexStoreError(f"index manifest {path} is unreadable ({exc}); the next update rebuilds it") from exc

    def load(self) -> Snapshot | None:
        """The live generation, opened and pinned, or None if there is none. IndexStoreError
        if it is damaged, in another format (the caller rebuilds) or was reclaimed while being
        opened (the caller reads `CURRENT` again)."""
        name = self.current_name()
        if name is None:
            return None
        directory = self.directory / name
        try:
            _check_kinds(directory)
            pin = _Pin(directory)
        except FileNotFoundError as exc:
            raise IndexStoreError(f"index generation {name} was reclaimed while being opened") from exc
        except ValueError as exc:
            raise IndexDamagedError(f"index {directory}: {exc}; it will be rebuilt", directory) from exc
        except OSError as exc:  # EACCES, EIO: the machine's, a rebuild would not help
            raise IndexStoreError(f"cannot read the index in {directory}: {exc}") from exc
        try:
            with reading("the index", directory):
                raw = json.loads(_read_small(directory / _MANIFEST, _MANIFEST_BYTES))
                if isinstance(raw, dict) and raw.get("format_version") != FORMAT_VERSION:
                    raise IndexStoreError(
                        f"index {directory} has format {raw.get('format_version')}, this codepager "
                        f"reads {FORMAT_VERSION}; it will be rebuilt"
                    )
                manifest = _manifest(raw)
                files = _read_files(directory / _FILES, manifest.chunks)
                over_budget = frozenset(_over_budget(directory / _OVER_BUDGET, _OVER_BUDGET_BYTES))
                chunks = ChunkTable(directory / _CHUNKS)
                vectors = _read_vectors(directory, manifest.chunks, manifest.dim)
        except IndexStoreError:
            pin.release()
            raise
        if (
            not over_budget <= files.keys()  # names a file the generation does not hold
            or len(chunks) != manifest.chunks
            or vectors.file_vectors.shape != (len(chunks.paths), manifest.dim)
        ):
            pin.release()
            raise IndexDamagedError(f"index {directory} is inconsistent; it will be rebuilt", directory)
        return Snapshot(directory, manifest, files, chunks, vectors, over_budget, pin)

    def latest_generation(self) -> int:
        """The highest generation number on disk, live or not (0 if none): a new generation
        is numbered above it, so numbers never repeat even after a crash or a rebuild."""
        best = 0
        for name in self._generations():
            best = max(best, _number(name))
        return best

    def begin(self, old: Snapshot | None) -> GenerationWriter:
        """Start writing a generation (call with the writer lock held); `old` is the one
        unchanged files are copied from."""
        self.directory.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX, dir=self.directory))
        return GenerationWriter(self, staging, old)

    def refresh_files(self, files: dict[str, FileEntry]) -> None:
        """Replace the live generation's file table in place (atomically). Used when files
        were only touched: their chunks are the same, so no new generation is due, but
        remembering the new mtimes spares re-hashing them on every later pass."""
        name = self.current_name()
        if name is None:
            return
        _replace_file(self.directory / name, _FILES, _packed_files(files))

    def reclaim(self) -> list[str]:
        """Delete superseded generations nobody has open (older than the live one, so a
        generation being published is never taken for one). Safe without the writer lock;
        returns the names deleted."""
        current = self.current_name()
        if current is None:
            return []
        return [
            name for name in self._generations() if _number(name) < _number(current) and self._delete_unpinned(name)
        ]

    def _point_current_at(self, name: str) -> None:
        _replace_file(self.directory, _CURRENT, (name + "\n").encode("ascii"))

    def _generations(self) -> list[str]:
        try:
            return sorted(n for n in os.listdir(self.directory) if n.startswith(_GEN_PREFIX))
        except OSError:
            return []

    def _delete_unpinned(self, name: str) -> bool:
        """Delete generation `name` if no process has it open: take its pins exclusively
        (never waiting), then remove it while holding them."""
        path = self.directory / name
        try:
            fd = os.open(path / _PINS, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            if (path / _MANIFEST).exists():
                return False  # not a generation this version wrote: leave it to the writer's sweep
            shutil.rmtree(path, ignore_errors=True)
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        else:
            (path / _PINS).unlink(missing_ok=True)  # a reader opening it now finds it gone
            shutil.rmtree(path, ignore_errors=True)
            return True
        finally:
            os.close(fd)

    def _sweep(self, keep: str) -> None:
        """After publishing `keep` (writer lock held): remove temporary leftovers of killed
        writers and every other generation nobody has open."""
        for entry in os.listdir(self.directory):
            if entry == keep:
                continue
            if entry.startswith(_GEN_PREFIX):
                self._delete_unpinned(entry)
            elif entry.startswith(_TMP_PREFIX):
                path = self.directory / entry
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)

    def size_on_disk(self) -> int:
        total = 0
        for dirpath, _dirs, names in os.walk(self.directory):
            for n in names:
                try:
                    total += os.lstat(os.path.join(dirpath, n)).st_size
                except OSError:
                    continue
        return total


class GenerationWriter:
    """Writes one generation file by file, in order, then publishes it.

    `add` takes a file's new chunks with their float vectors (quantized here) and appends
    them at once, so what stays in memory is the columns, not the chunks. `copy` takes an
    unchanged file's rows from the previous generation; consecutive unchanged files are
    copied together as one slice of every column (a run ends at the next added file), so an
    update does array copies per run of unchanged files and Python work only for the chunks
    that changed. The lexical postings of an update are the old ones with the new chunks'
    entries merged in at `publish` (`search_engine.index.postings_merge`), never re-sorted whole."""

    def __init__(self, store: IndexStore, staging: Path, old: Snapshot | None) -> None:
        self.store = store
        self.staging = staging
        # The vectors' width: the old generation's, else learnt from the first vectors added
        # (the caller asks the model only for a tree without a single chunk).
        self.dim: int | None = old.manifest.dim if old is not None else None
        self.old = old
        self.files: dict[str, FileEntry] = {}
        self.over_budget: list[str] = []  # files chunked as plain text, their parse over budget
        self.chunks = 0
        (staging / _CHUNKS).mkdir()
        self._table = ChunkTableWriter(staging / _CHUNKS)
        self._codes: BinaryIO = (staging / _CODES).open("wb")
        self._scales: BinaryIO = (staging / _SCALES).open("wb")
        self._words: BinaryIO = (staging / _WORDS).open("wb")
        self._file_vectors: list[np.ndarray] = []
        # A cold build's every chunk, an update's new chunks only (their ids in `_new_chunks`).
        self._lexical = LexicalBuilder(old.lexical().tokens if old is not None else ())
        self._new_chunks = array("q")
        self._run: _Run | None = None  # unchanged files waiting to be copied as one slice
        self._copied: list[_Run] = []
        self._open = True

    def add(
        self,
        path: str,
        entry: FileEntry,
        chunks: list[Chunk],
        vectors: np.ndarray | None,
        documents: list[list[str]] | None = None,
        text_keys: list[int] | None = None,
        *,
        over_budget: bool = False,
    ) -> None:
        """A file with new chunks (maybe none), `vectors` aligned with them (float32,
        normalized); `documents` their lexical documents when already made. `over_budget`:
        its chunks are plain text, its parse having outgrown its worker."""
        self.files[path] = FileEntry(entry.mtime_ns, entry.size, entry.digest, self.chunks, len(chunks))
        if over_budget:
            self.over_budget.append(path)
        if not chunks:
            return
        self._copy_run()
        vectors = np.asarray(vectors, dtype=np.float32)
        if self.dim is None:
            self.dim = int(vectors.shape[1])
        self._table.add_file(chunks, text_keys if text_keys is not None else [text_key(c) for c in chunks])
        codes, scales, words = quantize(vectors)
        self._codes.write(codes.tobytes())
        self._scales.write(scales.tobytes())
        self._words.write(words.tobytes())
        mean = vectors.sum(axis=0)
        self._file_vectors.append((mean / max(float(np.linalg.norm(mean)), 1e-9))[None, :])
        for i, c in enumerate(chunks):
            self._lexical.add(c.path, documents[i] if documents is not None else lexical_document(c))
        if self.old is not None:
            self._new_chunks.extend(range(self.chunks, self.chunks + len(chunks)))
        self.chunks += len(chunks)

    def copy(self, path: str, entry: FileEntry, old_entry: FileEntry) -> None:
        """An unchanged file: its rows of the previous generation (`old_entry`), with the
        file's current mtime, size and digest in `entry`. Copied with the unchanged files
        around it, when the run ends."""
        assert self.old is not None
        self.files[path] = FileEntry(entry.mtime_ns, entry.size, entry.digest, self.chunks, old_entry.count)
        if path in self.old.over_budget:
            self.over_budget.append(path)
        if old_entry.count == 0:
            return
        first, end = old_entry.first, old_entry.first + old_entry.count
        if self._run is not None and self._run.end == first:
            self._run = replace(self._run, end=end)
        else:
            self._copy_run()
            self._run = _Run(first, end, self.chunks)
        self.chunks += old_entry.count

    def _copy_run(self) -> None:
        """Copy the pending run of unchanged files' rows, every column as one slice."""
        run, self._run = self._run, None
        if run is None:
            return
        assert self.old is not None
        old, a, b = self.old, run.first, run.end
        run.new_file = len(self._table.paths)
        self._table.copy_rows(old.chunks, a, b - a)
        self._codes.write(np.ascontiguousarray(old.vectors.codes[a:b]).data)
        self._scales.write(np.ascontiguousarray(old.vectors.scales[a:b]).data)
        self._words.write(np.ascontiguousarray(old.vectors.words[:, a:b].T).data)
        self._file_vectors.append(np.asarray(old.vectors.file_vectors[run.files(old.chunks)]))
        self._copied.append(run)

    def _write_postings(self) -> None:
        self._lexical_index().save(self.staging / _LEXICAL)

    def _start_postings(self, pool: ThreadPoolExecutor) -> Future[None] | None:
        """The postings being written on `pool`'s thread, or None (the caller writes them) when
        no thread can start: a background refresh still publishing while the interpreter
        shuts down is refused new threads, and must not fail for that."""
        try:
            return pool.submit(self._write_postings)
        except RuntimeError:
            return None

    def _lexical_index(self) -> LexicalIndex:
        """A cold build's postings, or the old generation's with this update merged in."""
        if self.old is None:
            return self._lexical.finish()
        old = self.old.chunks
        chunk_map = np.full(len(old), -1, dtype=np.int32)
        file_map = np.full(len(old.paths), -1, dtype=np.int32)
        for run in self._copied:
            chunk_map[run.first : run.end] = np.arange(run.new_first, run.new_first + run.end - run.first)
            files = run.files(old)
            file_map[files] = np.arange(run.new_file, run.new_file + files.stop - files.start)
        new_chunks = np.frombuffer(self._new_chunks, dtype=np.int64) if self._new_chunks else np.zeros(0, np.int64)
        return merge(self.old.lexical(), chunk_map, file_map, self._lexical, new_chunks, self._table.paths)

    def publish(self, manifest: Manifest) -> Path:
        """Finish every part, rename the generation into place and make it live; then
        reclaim what it supersedes."""
        assert manifest.chunks == self.chunks and manifest.dim == (self.dim or manifest.dim)
        self.dim = manifest.dim
        self._copy_run()
        for fh in (self._codes, self._scales, self._words):
            fh.close()
        staging = self.staging
        # An update's postings (a merge of 12.6M entries at 8x sympy, mostly numpy work that
        # releases the GIL) share nothing with the other parts: they are written on a second
        # core meanwhile (0.1-0.2 s of a 2.5 s update). Not a cold build's: its postings sort
        # and the coarse training at once raised its peak memory by a third. Leaving the block
        # waits for them, error or not.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="codepager-postings") as pool:
            postings = self._start_postings(pool) if self.old is not None else None
            self._table.finish()
            self._transpose_words()
            write_coarse(staging, self.chunks, self.dim, self.old)
            file_vectors = (
                np.concatenate(self._file_vectors) if self._file_vectors else np.zeros((0, self.dim), np.float32)
            )
            np.save(staging / _FILE_VECTORS, file_vectors.astype(np.float32))
            (staging / _FILES).write_bytes(_packed_files(self.files))
            (staging / _OVER_BUDGET).write_bytes(pack(self.over_budget))
            if postings is None:
                self._write_postings()
            else:
                postings.result()
        (staging / _PINS).touch()
        (staging / _MANIFEST).write_text(json.dumps(asdict(manifest), indent=1), encoding="utf-8")
        store = self.store
        _replace_file(store.directory, "ROOT", (manifest.root + "\n").encode("utf-8", "surrogateescape"))
        name = f"{_GEN_PREFIX}{manifest.generation:08d}"
        os.rename(staging, store.directory / name)
        self._open = False
        store._point_current_at(name)
        store._sweep(keep=name)
        return store.directory / name

    def abandon(self) -> None:
        """Drop an unpublished generation (after an error); harmless after `publish`."""
        if self._open:
            self._open = False
            for fh in (self._codes, self._scales, self._words):
                fh.close()
            self._table.close()
            shutil.rmtree(self.staging, ignore_errors=True)

    def _transpose_words(self) -> None:
        """Sign words were appended row by row; search reads them column by column."""
        assert self.dim is not None, "publish sets dim from the manifest before this"
        path = self.staging / _WORDS
        words = np.fromfile(path, dtype=np.uint64).reshape(self.chunks, self.dim // WORD_BITS)
        np.ascontiguousarray(words.T).tofile(path)


@dataclass(slots=True)
class _Run:
    """Consecutive unchanged files' rows: old chunks `first..end`, written from chunk
    `new_first` on, their files from table file `new_file` on (known once copied)."""

    first: int
    end: int
    new_first: int
    new_file: int = -1

    def files(self, table: ChunkTable) -> slice:
        """The run's files in the old table."""
        return slice(int(table.file_of[self.first]), int(table.file_of[self.end - 1]) + 1)


class _WriterLock(FileLock):
    """A FileLock whose timeout surfaces as the engine's own error, with what to do."""

    def __enter__(self) -> _WriterLock:
        try:
            super().__enter__()
        except Timeout as exc:
            raise IndexStoreError(
                f"another process has been updating the index for over {self.timeout:.0f} s "
                f"(lock {self.lock_file}); try again later"
            ) from exc
        return self


def _number(name: str) -> int:
    try:
        return int(name[len(_GEN_PREFIX) :])
    except ValueError:
        return -1


#: What a manifest's fields may hold: (type, least, most). The counts bound what is read and
#: allocated from the other parts, so they are checked before anything is (ValueError); the
#: parts' sizes are then checked against them (`_read_vectors`). `dim` is any model's width.
_MANIFEST_FIELDS: dict[str, tuple[type, float, float]] = {
    "format_version": (int, 0, 1 << 31),
    "lexical_version": (int, 0, 1 << 31),
    "generation": (int, 0, 1 << 62),
    "dim": (int, 0, 1 << 20),
    "files": (int, 0, 1 << 31),
    "chunks": (int, 0, 1 << 31),
    "updated_at": (float, 0, float("inf")),
}


def _manifest(raw: Any) -> Manifest:
    """The manifest in `raw`, checked: ValueError unless every field is of its type and within
    its bounds (a crafted `dim` of 64,000,000 made reading the vectors allocate gigabytes)."""
    if not isinstance(raw, dict):
        raise ValueError("the manifest is not a JSON object")
    for name, (kind, least, most) in _MANIFEST_FIELDS.items():
        value = raw.get(name)
        number = isinstance(value, (int, float) if kind is float else int) and not isinstance(value, bool)
        if not number or not least <= float(value) <= most:  # type: ignore[arg-type]  # a number here
            raise ValueError(f"manifest field {name} is {value!r}")
    if not all(isinstance(raw.get(name), str) for name in ("chunker_version", "model_id", "root")):
        raise ValueError("the manifest's chunker_version, model_id and root must be text")
    return Manifest(**{k: raw[k] for k in Manifest.__dataclass_fields__})


def _stamp(path: Path) -> tuple[int, ...] | None:
    """What tells one version of a small file from another without reading it (None: it is
    not there): a file replaced by `os.replace` has another inode, one written in place
    another size or change time."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _read_small(path: Path, limit: int) -> bytes:
    """The bytes of `path`, a regular file of at most `limit` bytes: never through a link, never
    waiting on a FIFO, never reading a device (ValueError: the caller counts it as damage)."""
    with open_regular_file(path, max_bytes=limit) as f:
        data: bytes = f.read(limit + 1)
        return data


def _replace_file(directory: Path, name: str, data: bytes) -> None:
    """Put `data` in `directory/name`, atomically, through a temporary file of a random name
    created new (`O_EXCL | O_NOFOLLOW`): a link planted at the name, or at a temporary name
    guessed from the pid, is replaced, never written through."""
    fd, tmp = tempfile.mkstemp(prefix=f"{_TMP_PREFIX}{name}.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, directory / name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


#: A generation is a dozen files in two levels of directories; past these it is not one.
_MAX_DEPTH, _MAX_ENTRIES = 4, 1024


def _check_kinds(directory: Path) -> None:
    """ValueError unless everything in the generation `directory` is a regular file or a
    directory of such (no link, FIFO or device), at most `_MAX_DEPTH` deep and `_MAX_ENTRIES`
    in all: every part is then read as what it is, and no read can be led out of the
    generation or made to wait or to read without end. FileNotFoundError when the generation
    (or a part of it) is being reclaimed meanwhile."""
    pending, seen = [(directory, 0)], 0
    while pending:
        where, depth = pending.pop()
        with os.scandir(where) as entries:
            for entry in entries:
                seen += 1
                if entry.is_dir(follow_symlinks=False):
                    if depth + 1 > _MAX_DEPTH:
                        raise ValueError(f"{entry.name} is nested deeper than a generation is")
                    pending.append((Path(entry.path), depth + 1))
                elif not entry.is_file(follow_symlinks=False):
                    if not os.path.lexists(entry.path):
                        raise FileNotFoundError(entry.path)  # removed since it was listed
                    raise ValueError(f"{entry.name} is not a regular file")
                if seen > _MAX_ENTRIES:
                    raise ValueError(f"it holds more than {_MAX_ENTRIES} entries")


#: files.msgpack: path -> (mtime_ns, size, digest, first, count).
_FileTable = dict[str, tuple[int, Natural, str, Natural, Natural]]


def _packed_files(files: dict[str, FileEntry]) -> bytes:
    return pack({p: (e.mtime_ns, e.size, e.digest, e.first, e.count) for p, e in files.items()})


def _read_files(path: Path, chunks: int) -> dict[str, FileEntry]:
    """The file table; ValueError unless each entry is what `_packed_files` writes, its chunks
    within the `chunks` rows (a crafted `first` past them failed every update)."""
    files = {}
    for p, row in unpack(path.read_bytes(), _FileTable).items():
        entry = FileEntry(*row)
        if entry.first + entry.count > chunks:
            raise ValueError(f"the file table's entry for {p!r} is out of range")
        files[p] = entry
    return files


def _over_budget(path: Path, limit: int) -> list[str]:
    """The over-budget list at `path` (at most `limit` bytes; ValueError unless a list of
    text), or none when the generation predates it."""
    try:
        return unpack(_read_small(path, limit), list[str])
    except FileNotFoundError:
        return []


def write_coarse(directory: Path, n: int, dim: int, old: Snapshot | None) -> None:
    """Write the coarse quantizer of a generation whose chunk table, `n` rows of int8 codes
    and sign words are complete in `directory` (nothing below `coarse.MIN_CHUNKS`). Chunks
    whose embedding text the previous generation `old` had keep their list there; the rest
    are compared with its centroids (or new ones are trained, see `coarse.build`)."""
    if n < coarse.MIN_CHUNKS:
        return
    codes = np.memmap(directory / _CODES, dtype=np.int8, mode="r", shape=(n, dim))
    keys = np.asarray(ChunkTable(directory / _CHUNKS).rows["text_hash"])
    previous = None
    if old is not None and old.vectors.coarse is not None:
        previous = (old.vectors.coarse, np.asarray(old.chunks.rows["text_hash"]))
    coarse.save(directory, coarse.build(codes, keys, previous))


def _read_vectors(directory: Path, n: int, dim: int) -> VectorIndex:
    """The quantized vectors, memory-mapped (sizes checked against the manifest)."""
    words = dim // WORD_BITS
    file_vectors = load_array(directory / _FILE_VECTORS, mmap=False)
    expected = {_CODES: n * dim, _SCALES: n * 4, _WORDS: n * words * 8}
    for name, size in expected.items():
        actual = (directory / name).stat().st_size
        if actual != size:
            raise IndexDamagedError(
                f"index {directory} is inconsistent ({name}: {actual} bytes, expected {size}); it will be rebuilt",
                directory,
            )
    if n == 0:
        return replace(empty(dim), file_vectors=file_vectors)
    return VectorIndex(
        mapped(np.memmap(directory / _CODES, dtype=np.int8, mode="r", shape=(n, dim))),
        mapped(np.memmap(directory / _SCALES, dtype=np.float32, mode="r", shape=(n,))),
        mapped(np.memmap(directory / _WORDS, dtype=np.uint64, mode="r", shape=(words, n))),
        file_vectors,
        coarse.load(directory, n, dim),
    )
