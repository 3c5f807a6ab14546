"""Chunk metadata in columns and chunk text compressed per file: what an index keeps of chunks.

A `Chunk` per chunk as a Python object costs ~1 KB with its text: 450k chunks held 600 MB
and took seconds to unpickle before the first search. Here every numeric field is a column of
one structured numpy array (`rows.npy`, memory-mapped), strings that repeat (paths, languages,
kinds) are stored once, symbol names sit in one UTF-8 blob, and chunk text is zlib-compressed
one file at a time (`text.bin`): showing a result decompresses one file's chunks, and an
update copies an unchanged file's compressed bytes as they are. `table[i]` builds the `Chunk`
on demand, so code that takes a `Sequence[Chunk]` keeps working.

The names each chunk defines (`search_engine.ranking.symbols.defined_names`) are extracted once at
build time and stored as columns too (`defs.*`): the symbol index is rebuilt from them at
load without reading any chunk text.
"""

from __future__ import annotations

import bisect
import threading
import zlib
from array import array
from collections.abc import Sequence
from pathlib import Path

import msgspec
import numpy as np

from search_engine.chunking.chunk import Chunk, ChunkSequence, content_hash
from search_engine.config import MAX_FILE_SIZE_LIMIT
from search_engine.embedding.embedder import chunk_text
from search_engine.errors import reading
from search_engine.index.arrays import load_array
from search_engine.index.packed import Natural, pack, unpack
from search_engine.ranking.symbols import defined_names

ROW = np.dtype([
    ("file", "<i4"), ("line_start", "<i4"), ("line_end", "<i4"), ("byte_start", "<i8"), ("byte_end", "<i8"),
    ("kind", "<u2"), ("hash", "<u8"), ("text_hash", "<u8"), ("text_off", "<i8"), ("text_len", "<i4"),
    ("symbol_off", "<i8"), ("symbol_len", "<i4"),
])  # fmt: skip
_ROWS, _STRINGS, _TEXT, _SYMBOLS = "rows.npy", "strings.msgpack", "text.bin", "symbols.bin"
_DEF_CHUNK, _DEF_FACTOR, _DEF_NAMES = "defs.chunk.npy", "defs.factor.npy", "defs.names.msgpack"
_ENC = "surrogatepass"
# Decompressed files kept per table: a page of results usually comes from a few files.
_TEXT_CACHE = 16
#: The most of one file's text ever decompressed: files over `search.max_file_size` (1 MiB by
#: default, at most `MAX_FILE_SIZE_LIMIT`) are never indexed, and a file's text as stored is
#: at most twice its bytes. Bounds what crafted text and rows can inflate.
MAX_FILE_TEXT = 2 * MAX_FILE_SIZE_LIMIT


class _Strings(msgspec.Struct):
    """strings.msgpack: what repeats across chunks, once per file or kind."""

    paths: list[str]
    languages: list[str | None]
    kinds: list[str]
    text_bounds: list[Natural]


def text_key(chunk: Chunk) -> int:
    """The digest of a chunk's embedding text as an integer: equal keys embed alike, so an
    edited file's untouched chunks keep their vectors."""
    return key_of_text(chunk_text(chunk))


def key_of_text(text: str) -> int:
    """`text_key` of a chunk whose embedding text (`chunk_text`) the caller already has."""
    return int(content_hash(text), 16)


class ChunkTable(ChunkSequence):
    """The chunks of one index generation (read-only)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        strings = unpack((directory / _STRINGS).read_bytes(), _Strings)
        self.paths = strings.paths
        self.languages = strings.languages
        self.kinds = strings.kinds
        self._text_bounds = np.asarray(strings.text_bounds, dtype=np.int64)
        self.rows = _load(directory / _ROWS, ROW)
        self._symbols = _blob(directory / _SYMBOLS)
        self._text = _blob(directory / _TEXT)
        self._check_extents()
        self._cache: dict[int, bytes] = {}
        self._definitions: tuple[np.ndarray, np.ndarray, list[str]] | None = None
        self._lock = threading.Lock()

    def _check_extents(self) -> None:
        """ValueError unless every column reaches exactly as far as the others say. The writer
        goes in chunk order, file by file, so the last row and the last bound tell where every
        blob ends: a part cut short or emptied (a full disk, an interrupted copy) is caught
        here, in O(1), and not as wrong symbols or a zlib error at some later search."""
        rows, files = self.rows, len(self.paths)
        symbols_end = _symbols_end(rows) if len(rows) else 0
        extents = {
            "languages": (len(self.languages), files),
            "text bounds": (len(self._text_bounds), files + 1),
            "text.bin": (len(self._text), int(self._text_bounds[-1]) if len(self._text_bounds) else 0),
            "symbols.bin": (len(self._symbols), symbols_end),
            "last row's file": (int(rows["file"][-1]) + 1 if len(rows) else 0, files),
        }
        for part, (actual, expected) in extents.items():
            if actual != expected:
                raise ValueError(f"{part}: {actual}, the other parts say {expected}")
        # Every row's file and kind must name one (a crafted id failed each search with an
        # IndexError), files in order; one vectorised pass over two columns.
        if len(rows):
            file_of, kinds = rows["file"], rows["kind"]
            if int(file_of[0]) < 0 or np.any(np.diff(file_of) < 0) or int(kinds.max()) >= len(self.kinds):
                raise ValueError("rows name files or kinds that are not there")

    def __len__(self) -> int:
        return len(self.rows)

    def _chunk_at(self, i: int) -> Chunk:
        # The row as one tuple of Python ints: reading its fields one by one cost more than
        # the rest of building the chunk (a warm query builds ten).
        f, line_start, line_end, byte_start, byte_end, kind, digest, _, text_off, text_len, symbol_off, symbol_len = (
            self.rows[i].item()
        )
        text = self._file_text(f)[text_off : text_off + text_len].decode("utf-8", _ENC)
        symbol = None if symbol_len < 0 else bytes(self.symbol_bytes(symbol_off, symbol_len)).decode("utf-8", _ENC)
        return Chunk(
            self.paths[f], self.languages[f], line_start, line_end, byte_start, byte_end, text, self.kinds[kind],
            symbol, f"{digest:016x}",
        )  # fmt: skip

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    @property
    def file_of(self) -> np.ndarray:
        """Each chunk's index into `paths`."""
        return self.rows["file"]

    def definitions(self) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """(chunk ids ascending, evidence factors, names): every name a chunk defines. Read
        once per table."""
        with self._lock:
            if self._definitions is None:
                with reading("the symbol definitions", self.directory):
                    chunk = _load(self.directory / _DEF_CHUNK, np.dtype("<i4"))
                    factor = _load(self.directory / _DEF_FACTOR, np.dtype("<f4"))
                    names = unpack((self.directory / _DEF_NAMES).read_bytes(), list[str])
                    if not len(chunk) == len(factor) == len(names):
                        raise ValueError("symbol definition columns disagree")
                    if len(chunk) and (int(chunk.min()) < 0 or int(chunk.max()) >= len(self.rows)):
                        raise ValueError("symbol definitions name chunks that are not there")
                self._definitions = (chunk, factor, names)
            return self._definitions

    def definitions_of(self, first: int, count: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """`definitions()` of chunks `first..first+count`."""
        chunk, factor, names = self.definitions()
        lo, hi = (int(x) for x in np.searchsorted(chunk, [first, first + count]))
        return np.asarray(chunk[lo:hi]), np.asarray(factor[lo:hi]), names[lo:hi]

    def _file_text(self, f: int) -> bytes:
        with self._lock:
            text = self._cache.get(f)
            if text is None:
                start, end = int(self._text_bounds[f]), int(self._text_bounds[f + 1])
                with reading(f"the chunk text of {self.paths[f]!r}", self.directory):
                    reach = self._text_reach(f)
                    text = zlib.decompressobj().decompress(bytes(self._text[start:end]), reach) if reach else b""
                    if len(text) != reach:  # a cut stream inflates short, without an error
                        raise ValueError(f"the text inflates to {len(text):,} bytes, its chunks reach {reach:,}")
                if len(self._cache) >= _TEXT_CACHE:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[f] = text
            return text

    def _text_reach(self, f: int) -> int:
        """How far into file `f`'s text its chunks reach: the length of its stored text (a
        file's chunks cover its text), so all that is decompressed (a bomb in text.bin, 1 MB
        inflating to 1 GB, inflates no further); ValueError past `MAX_FILE_TEXT`."""
        # Bisected in place: `searchsorted` copies the strided column whole first (0.2 ms a
        # call at 85k chunks, paid per file shown).
        files = self.rows["file"]
        lo = bisect.bisect_left(files, f)
        rows = self.rows[lo : bisect.bisect_left(files, f + 1, lo)]
        reach = int((rows["text_off"].astype(np.int64) + rows["text_len"]).max()) if len(rows) else 0
        if not 0 <= reach <= MAX_FILE_TEXT:
            raise ValueError(f"its chunks reach {reach:,} bytes into its text")
        return reach

    def symbol_bytes(self, start: int, n: int) -> memoryview:
        return self._symbols[start : start + n]

    def text_bounds(self, f0: int, f1: int) -> np.ndarray:
        """Where files `f0..f1` start in the compressed text, and where the last ends."""
        return self._text_bounds[f0 : f1 + 1]

    def compressed_text_of(self, f0: int, f1: int) -> memoryview:
        """Files `f0..f1`'s compressed text, as stored (one slice, nothing decompressed)."""
        return self._text[int(self._text_bounds[f0]) : int(self._text_bounds[f1])]


def take(chunks: Sequence[Chunk], ids: Sequence[int]) -> list[Chunk]:
    """`chunks[i]` for each of `ids`, in that order, read in chunk order, so that a table
    inflates each file's text once however the ids are ordered (a joined corpus reads its
    table's chunks first, in order too). Read in the order given (results best first),
    10,000 results spread over ~2,000 files missed the table's file cache nearly every time:
    10,000 inflations, most of a top_k 10,000 search's 9 s."""
    read = {i: chunks[i] for i in sorted(set(ids))}
    return [read[i] for i in ids]


class ChunkTableWriter:
    """Writes a `ChunkTable` file by file, in chunk order, holding only the columns (a few
    dozen bytes a chunk) until `finish`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._text = (directory / _TEXT).open("wb")
        self._symbols = (directory / _SYMBOLS).open("wb")
        self._rows: list[np.ndarray] = []
        self._count = 0
        self._text_bounds = [0]
        self._symbol_size = 0
        self.paths: list[str] = []
        self.languages: list[str | None] = []
        self._kinds: dict[str, int] = {}
        self._def_chunk = array("i")
        self._def_factor = array("f")
        self._def_names: list[str] = []

    def add_file(self, chunks: Sequence[Chunk], text_keys: Sequence[int]) -> None:
        """A file's new chunks (all of one path, at least one) and their `text_key`s."""
        f = self._new_file(chunks[0].path, chunks[0].language)
        rows = np.zeros(len(chunks), dtype=ROW)
        blob = bytearray()
        for j, c in enumerate(chunks):
            data = c.content.encode("utf-8", _ENC)
            symbol = c.symbol.encode("utf-8", _ENC) if c.symbol is not None else None
            rows[j] = (
                f, c.line_start, c.line_end, c.byte_start, c.byte_end, self._kind(c.kind), int(c.content_hash, 16),
                text_keys[j], len(blob), len(data), self._symbol_size, -1 if symbol is None else len(symbol),
            )  # fmt: skip
            blob += data
            if symbol:
                self._symbols.write(symbol)
                self._symbol_size += len(symbol)
            for name, factor in defined_names(c).items():
                self._def_chunk.append(self._count + j)
                self._def_factor.append(factor)
                self._def_names.append(name)
        self._write_text(zlib.compress(bytes(blob), 6))
        self._append(rows)

    def copy_rows(self, table: ChunkTable, first: int, count: int) -> None:
        """Chunks `first..first+count` of a previous generation's table (whole files, in a
        row), columns, compressed text, symbols and definitions each copied as one slice:
        an update costs a few array operations per run of unchanged files, not Python work
        per chunk."""
        rows = np.array(table.rows[first : first + count])
        f0, f1 = int(rows["file"][0]), int(rows["file"][-1]) + 1
        rows["file"] += len(self.paths) - f0
        self.paths.extend(table.paths[f0:f1])
        self.languages.extend(table.languages[f0:f1])
        kinds = np.array([self._kind(k) for k in table.kinds], dtype=np.uint16)
        rows["kind"] = kinds[rows["kind"]]
        # Symbols were written in chunk order: the run's bytes are one slice of the blob.
        s0 = int(rows["symbol_off"][0])
        s1 = _symbols_end(rows)
        self._symbols.write(table.symbol_bytes(s0, s1 - s0))
        rows["symbol_off"] += self._symbol_size - s0
        self._symbol_size += s1 - s0
        bounds = table.text_bounds(f0, f1)
        self._text.write(table.compressed_text_of(f0, f1))
        self._text_bounds.extend((bounds[1:] - bounds[0] + self._text_bounds[-1]).tolist())
        chunk, factor, names = table.definitions_of(first, count)
        self._def_chunk.frombytes((chunk - first + self._count).astype(np.int32).tobytes())
        self._def_factor.frombytes(factor.astype(np.float32).tobytes())
        self._def_names.extend(names)
        self._append(rows)

    def finish(self) -> int:
        """Write the columns; the number of chunks written."""
        self._text.close()
        self._symbols.close()
        rows = np.concatenate(self._rows) if self._rows else np.zeros(0, dtype=ROW)
        np.save(self.directory / _ROWS, rows)
        np.save(
            self.directory / _DEF_CHUNK,
            np.frombuffer(self._def_chunk, dtype=np.int32) if self._def_chunk else np.zeros(0, np.int32),
        )
        np.save(
            self.directory / _DEF_FACTOR,
            np.frombuffer(self._def_factor, dtype=np.float32) if self._def_factor else np.zeros(0, np.float32),
        )
        # msgpack, not lines: a chunk's symbol may span lines (a C++ operator, a macro)
        (self.directory / _DEF_NAMES).write_bytes(pack(self._def_names))
        strings = _Strings(self.paths, self.languages, list(self._kinds), self._text_bounds)
        (self.directory / _STRINGS).write_bytes(pack(strings))
        return self._count

    def close(self) -> None:
        """Release the files of an abandoned write."""
        self._text.close()
        self._symbols.close()

    def _new_file(self, path: str, language: str | None) -> int:
        self.paths.append(path)
        self.languages.append(language)
        return len(self.paths) - 1

    def _kind(self, kind: str) -> int:
        return self._kinds.setdefault(kind, len(self._kinds))

    def _write_text(self, compressed: bytes) -> None:
        self._text.write(compressed)
        self._text_bounds.append(self._text_bounds[-1] + len(compressed))

    def _append(self, rows: np.ndarray) -> None:
        self._rows.append(rows)
        self._count += len(rows)


def _load(path: Path, dtype: np.dtype) -> np.ndarray:
    """A .npy column, memory-mapped, of `dtype` (ValueError otherwise)."""
    array_ = load_array(path)
    if array_.dtype != dtype:
        raise ValueError(f"{path.name} holds {array_.dtype}, expected {dtype}")
    return array_


def _symbols_end(rows: np.ndarray) -> int:
    """Where the symbol names of `rows` (consecutive, at least one) end in the blob: symbols
    are written in chunk order, so after the last row's (a row without one has length -1)."""
    return int(rows["symbol_off"][-1]) + max(int(rows["symbol_len"][-1]), 0)


def _blob(path: Path) -> memoryview:
    """A byte column's bytes, memory-mapped (an empty file cannot be mapped)."""
    return np.memmap(path, dtype=np.uint8, mode="r").data if path.stat().st_size else memoryview(b"")
