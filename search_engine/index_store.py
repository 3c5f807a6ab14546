"""The on-disk layout of one root's index, and the only code that reads or writes it.

    <cache_dir>/indexes/<sha256(root)[:16]>/
        ROOT                  the indexed root, for people looking at the cache
        CURRENT               name of the live generation directory ("gen-00000007")
        write.lock            held by whichever process is updating
        gen-00000007/         one complete index generation, never modified except:
            manifest.json     versions, model, generation, counts, update time
            files.msgpack     per file: mtime_ns, size, content digest, its chunk range
                              (replaced atomically when files were only touched)
            chunks.msgpack    chunk metadata and text, column by column
            vectors.npy       (chunks, dim) float32, L2-normalized, memory-mapped on load
            lexical/          the BM25 index (`search_engine.lexical`)

Why generations: a writer builds a complete new directory under a temporary name, renames it
into place and only then swaps `CURRENT` (an atomic rename too). A process killed at any
point leaves `CURRENT` naming a complete generation, and readers never lock: they read
`CURRENT`, then a directory whose search data nobody modifies. The previous generation is kept one round so a
reader that just resolved `CURRENT` can still open it; older ones and abandoned temporary
directories are swept by the next writer, under the lock.

The index lives in the user cache dir, not inside the searched tree (a cache dir configured
inside it is excluded from indexing).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import msgpack
import numpy as np
from filelock import FileLock, Timeout

from search_engine.chunks import Chunk
from search_engine.errors import IndexStoreError
from search_engine.lexical import LexicalIndex

# Bumped whenever anything below changes shape: an index in another format is rebuilt.
FORMAT_VERSION = 1

_CURRENT = "CURRENT"
_LOCK = "write.lock"
_GEN_PREFIX = "gen-"
_TMP_PREFIX = ".tmp-"
_MANIFEST = "manifest.json"
_FILES = "files.msgpack"
_CHUNKS = "chunks.msgpack"
_VECTORS = "vectors.npy"
_LEXICAL = "lexical"


def index_dir(cache_dir: Path, root: Path) -> Path:
    """Where the index of `root` lives: a digest of its resolved path, so two checkouts of
    the same project never share an index."""
    digest = hashlib.sha256(str(Path(root).resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return Path(cache_dir) / "indexes" / digest


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


@dataclass(slots=True)
class Snapshot:
    """One generation, loaded: vectors are memory-mapped, chunks in memory."""

    directory: Path
    manifest: Manifest
    files: dict[str, FileEntry]
    chunks: list[Chunk]
    vectors: np.ndarray

    def lexical(self) -> LexicalIndex:
        return LexicalIndex.load(self.directory / _LEXICAL)


class IndexStore:
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def lock(self, timeout_s: float) -> FileLock:
        """The writers' lock (readers never take it). Timeout -> IndexStoreError on enter."""
        self.directory.mkdir(parents=True, exist_ok=True)
        return _WriterLock(str(self.directory / _LOCK), timeout=timeout_s)

    def current_name(self) -> str | None:
        """The live generation's directory name, or None if there is no index yet. One small
        read: cheap enough to call before every search."""
        try:
            name = (self.directory / _CURRENT).read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            return None
        return name if name.startswith(_GEN_PREFIX) and (self.directory / name).is_dir() else None

    def read_manifest(self) -> Manifest | None:
        """The live generation's manifest without loading the rest (None: no index yet).
        IndexStoreError if it cannot be read."""
        name = self.current_name()
        if name is None:
            return None
        path = self.directory / name / _MANIFEST
        try:
            return _manifest(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise IndexStoreError(f"index manifest {path} is unreadable ({exc}); the next update rebuilds it") from exc

    def load(self) -> Snapshot | None:
        """The live generation, or None if there is none. IndexStoreError if it is damaged or
        in another format (the caller rebuilds)."""
        name = self.current_name()
        if name is None:
            return None
        directory = self.directory / name
        try:
            raw = json.loads((directory / _MANIFEST).read_text(encoding="utf-8"))
            if raw.get("format_version") != FORMAT_VERSION:
                raise IndexStoreError(
                    f"index {directory} has format {raw.get('format_version')}, this codepager "
                    f"reads {FORMAT_VERSION}; it will be rebuilt"
                )
            manifest = _manifest(raw)
            files = _read_files(directory / _FILES)
            chunks = _read_chunks(directory / _CHUNKS)
            vectors = np.load(directory / _VECTORS, mmap_mode="r")
        except IndexStoreError:
            raise
        except (OSError, ValueError, TypeError, KeyError, msgpack.UnpackException) as exc:
            raise IndexStoreError(f"index {directory} is damaged ({exc}); it will be rebuilt") from exc
        if vectors.shape[0] != len(chunks) or len(chunks) != manifest.chunks:
            raise IndexStoreError(f"index {directory} is inconsistent; it will be rebuilt")
        return Snapshot(directory, manifest, files, chunks, vectors)

    def latest_generation(self) -> int:
        """The highest generation number on disk, live or not (0 if none): a new generation
        is numbered above it, so numbers never repeat even after a crash or a rebuild."""
        best = 0
        try:
            names = os.listdir(self.directory)
        except OSError:
            return 0
        for name in names:
            if name.startswith(_GEN_PREFIX):
                try:
                    best = max(best, int(name[len(_GEN_PREFIX):]))
                except ValueError:
                    continue
        return best

    def publish(
        self,
        manifest: Manifest,
        files: dict[str, FileEntry],
        chunks: Sequence[Chunk],
        vectors: np.ndarray,
        lexical: LexicalIndex,
    ) -> Path:
        """Write a complete generation and make it live. Call with the writer lock held."""
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "ROOT").write_text(manifest.root + "\n", encoding="utf-8")
        name = f"{_GEN_PREFIX}{manifest.generation:08d}"
        staging = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{name}-", dir=self.directory))
        try:
            (staging / _MANIFEST).write_text(json.dumps(asdict(manifest), indent=1), encoding="utf-8")
            _write_files(staging / _FILES, files)
            _write_chunks(staging / _CHUNKS, chunks)
            np.save(staging / _VECTORS, np.ascontiguousarray(vectors, dtype=np.float32))
            lexical.save(staging / _LEXICAL)
            os.rename(staging, self.directory / name)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        self._point_current_at(name)
        self._sweep(keep={name, *self._previous(name)})
        return self.directory / name

    def refresh_files(self, files: dict[str, FileEntry]) -> None:
        """Replace the live generation's file table in place (atomically). Used when files
        were only touched: their chunks are the same, so no new generation is due, but
        remembering the new mtimes spares re-hashing them on every later pass."""
        name = self.current_name()
        if name is None:
            return
        target = self.directory / name / _FILES
        tmp = target.with_name(f"{_TMP_PREFIX}{_FILES}.{os.getpid()}")
        _write_files(tmp, files)
        os.replace(tmp, target)

    def _point_current_at(self, name: str) -> None:
        tmp = self.directory / f"{_TMP_PREFIX}{_CURRENT}.{os.getpid()}"
        tmp.write_text(name + "\n", encoding="ascii")
        os.replace(tmp, self.directory / _CURRENT)

    def _previous(self, name: str) -> list[str]:
        gens = sorted(n for n in os.listdir(self.directory) if n.startswith(_GEN_PREFIX) and n < name)
        return gens[-1:]

    def _sweep(self, keep: set[str]) -> None:
        """Remove generations other than `keep` and temporary leftovers of killed writers."""
        for entry in os.listdir(self.directory):
            if entry in keep or not entry.startswith((_GEN_PREFIX, _TMP_PREFIX)):
                continue
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


def _manifest(raw: dict) -> Manifest:
    return Manifest(**{k: raw[k] for k in Manifest.__dataclass_fields__})


def _write_files(path: Path, files: dict[str, FileEntry]) -> None:
    rows = {p: [e.mtime_ns, e.size, e.digest, e.first, e.count] for p, e in files.items()}
    path.write_bytes(msgpack.packb(rows, use_bin_type=True))


def _read_files(path: Path) -> dict[str, FileEntry]:
    rows = msgpack.unpackb(path.read_bytes(), raw=False, strict_map_key=False)
    return {p: FileEntry(*r) for p, r in rows.items()}


# Chunks are stored column by column: paths and languages once per file, not per chunk.
def _write_chunks(path: Path, chunks: Sequence[Chunk]) -> None:
    paths: list[str] = []
    languages: list[str | None] = []
    file_of: list[int] = []
    for c in chunks:
        if not paths or paths[-1] != c.path:
            paths.append(c.path)
            languages.append(c.language)
        file_of.append(len(paths) - 1)
    columns = {
        "paths": paths,
        "languages": languages,
        "file": file_of,
        "line_start": [c.line_start for c in chunks],
        "line_end": [c.line_end for c in chunks],
        "byte_start": [c.byte_start for c in chunks],
        "byte_end": [c.byte_end for c in chunks],
        "content": [c.content for c in chunks],
        "kind": [c.kind for c in chunks],
        "symbol": [c.symbol for c in chunks],
        "hash": [c.content_hash for c in chunks],
    }
    path.write_bytes(msgpack.packb(columns, use_bin_type=True))


def _read_chunks(path: Path) -> list[Chunk]:
    col = msgpack.unpackb(path.read_bytes(), raw=False)
    paths, languages = col["paths"], col["languages"]
    return [
        Chunk(paths[f], languages[f], ls, le, bs, be, content, kind, symbol, h)
        for f, ls, le, bs, be, content, kind, symbol, h in zip(
            col["file"], col["line_start"], col["line_end"], col["byte_start"], col["byte_end"],
            col["content"], col["kind"], col["symbol"], col["hash"], strict=True,
        )
    ]

