"""BM25 over chunks: the exact-word signal of hybrid search.

Embeddings blur names: `ClientSession` and `ClientResponse` look alike to a static model, and a
rare identifier a query names outright is exactly what BM25's IDF rewards. Each chunk's
document is its code tokens (see `search_engine.tokenize`) plus its path tokens, repeated so a
file named after the topic (`multipart.py` for "multipart handling") outweighs a passing
mention elsewhere. Scoring is `bm25s` over a sparse matrix: one query costs a few sparse column
sums, well under a millisecond for repositories of tens of thousands of chunks.

The index is persisted next to the vectors by `search_engine.index`; `save`/`load` only move
files inside a directory the caller provides (and makes atomic).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import bm25s
import numpy as np

from search_engine.chunks import Chunk
from search_engine.errors import IndexStoreError
from search_engine.tokenize import path_tokens, tokenize_text

# Bumped whenever tokenization or the document recipe changes: an index saved by another
# version scores differently, so `load` refuses it and the index is rebuilt.
LEXICAL_VERSION = 1
_META_FILE = "lexical.json"

# How many times a chunk's path tokens are added to its document. Two makes a file-name match
# count about as much as a few mentions in the body, without drowning the body.
PATH_REPEAT = 2

# BM25 parameters: the usual defaults; chunks are already of similar length, so b matters less.
K1 = 1.2
B = 0.75

logging.getLogger("bm25s").setLevel(logging.WARNING)


def chunk_document(chunk: Chunk) -> list[str]:
    """The bag of words a chunk is indexed under: its text, then its path, `PATH_REPEAT` times."""
    return tokenize_text(chunk.content) + path_tokens(chunk.path) * PATH_REPEAT


class LexicalIndex:
    """BM25 scores of every chunk for a query's terms, aligned with the chunk list it was
    built from (the index keeps that order)."""

    def __init__(self, bm25: bm25s.BM25 | None, size: int) -> None:
        self._bm25 = bm25
        self.size = size

    @classmethod
    def build(cls, chunks: Sequence[Chunk]) -> LexicalIndex:
        if not chunks:
            return cls(None, 0)
        bm25 = bm25s.BM25(k1=K1, b=B, method="lucene")
        bm25.index([chunk_document(c) for c in chunks], show_progress=False)
        return cls(bm25, len(chunks))

    def scores(self, terms: Sequence[str]) -> np.ndarray:
        """BM25 score of every chunk (float32, length `size`); zero where no term occurs.

        Terms absent from the vocabulary are skipped, so an all-unknown query scores zeros
        rather than failing."""
        if self._bm25 is None:
            return np.zeros(0, dtype=np.float32)
        ids = self._bm25.get_tokens_ids(list(terms))
        if not ids:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._bm25.get_scores_from_ids(ids), dtype=np.float32)

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        if self._bm25 is not None:
            self._bm25.save(str(directory), show_progress=False)
        meta = {"version": LEXICAL_VERSION, "size": self.size}
        (directory / _META_FILE).write_text(json.dumps(meta))

    @classmethod
    def load(cls, directory: Path) -> LexicalIndex:
        """Load what `save` wrote. IndexStoreError if it is missing, damaged or from another
        `LEXICAL_VERSION` (the caller rebuilds)."""
        try:
            meta = json.loads((directory / _META_FILE).read_text())
            if meta.get("version") != LEXICAL_VERSION:
                raise IndexStoreError(
                    f"lexical index in {directory} has version {meta.get('version')}, "
                    f"this codepager writes {LEXICAL_VERSION}; rebuild the index"
                )
            size = int(meta["size"])
            if size == 0:
                return cls(None, 0)
            bm25 = bm25s.BM25.load(str(directory), show_progress=False)
        except (OSError, ValueError, KeyError) as exc:
            raise IndexStoreError(f"cannot read the lexical index in {directory}: {exc}; rebuild the index") from exc
        return cls(bm25, size)
