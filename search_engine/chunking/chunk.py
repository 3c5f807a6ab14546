"""The unit of semantic and lexical search: a `Chunk`, a contiguous span of one file.

Chunking (`search_engine.chunking.chunker`) produces them, the index stores them, and ranking scores
them; this module holds only the type so that every side can import it without pulling in
tree-sitter or an embedding model. A chunk keeps both its line span (what people and agents
read) and its byte span (what editors and `Match` need) so a result can be located exactly.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


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


def content_hash(text: str) -> str:
    """Short, stable digest of chunk text (collisions are harmless at this length: 64 bits)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
