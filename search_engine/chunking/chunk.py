"""The unit of semantic and lexical search: a `Chunk`, a contiguous span of one file.

Chunking (`search_engine.chunking.chunker`) produces them, the index stores them, and ranking scores
them; this module holds only the types (and `ChunkSequence`, the base of the sequences that
build chunks on demand) so that every side can import it without pulling in tree-sitter or an
embedding model. A chunk keeps both its line span (what people and agents
read) and its byte span (what editors and `Match` need) so a result can be located exactly.
"""

from __future__ import annotations

import hashlib
from abc import abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload


@dataclass(frozen=True, slots=True)
class Chunk:
    """A contiguous piece of a file, cut where the code's structure allows.

    `path` is relative to the index root with forward slashes. Lines are 1-based inclusive,
    bytes 0-based end-exclusive (offsets into the file's UTF-8 bytes). `kind` says what the
    span is ("function", "class", "method", "module", "window", ...), `symbol` the name it
    defines, qualified where cheap ("ClientSession.close"), or None for windows and module
    code. `content_hash` digests the content so equal text embeds once.
    """

    path: str
    language: str | None
    line_start: int
    line_end: int
    byte_start: int
    byte_end: int
    content: str
    kind: str
    symbol: str | None
    content_hash: str


class ChunkSequence(Sequence[Chunk]):
    """Chunks built one at a time by position, for the sequences that do not hold them as
    objects (an index generation's table, a generation joined with the live files): indexing,
    negative positions and slices are answered here once, so each kind only says how to
    build chunk `i` of `0 <= i < len(self)` (`_chunk_at`)."""

    @abstractmethod
    def _chunk_at(self, i: int) -> Chunk: ...

    @overload
    def __getitem__(self, i: int) -> Chunk: ...
    @overload
    def __getitem__(self, i: slice) -> list[Chunk]: ...
    def __getitem__(self, i: int | slice) -> Chunk | list[Chunk]:
        if isinstance(i, slice):
            return [self._chunk_at(j) for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return self._chunk_at(i)

    def __iter__(self) -> Iterator[Chunk]:
        return (self._chunk_at(i) for i in range(len(self)))


def content_hash(text: str) -> str:
    """Short, stable digest of chunk text (collisions are harmless at this length: 64 bits)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
