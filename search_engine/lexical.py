"""BM25 over chunks and over whole files: the exact-word signals of hybrid search.

Embeddings blur names: `ClientSession` and `ClientResponse` look alike to a static model, and a
rare identifier a query names outright is exactly what BM25's IDF rewards. Two granularities:

- per chunk, to find the function that talks about the query's words;
- per file (the concatenation of its chunks' documents), because a question such as "how is
  chunked transfer encoding parsed" spreads its words over a module (`chunked` in one method,
  `transfer encoding` in another) and only the file as a whole matches them all.

A chunk's document is its code tokens (`search_engine.tokenize`) plus its path tokens,
repeated so a file named after the topic (`multipart.py` for "multipart handling") outweighs
a passing mention elsewhere. Scoring is `bm25s` over a
sparse matrix: a query costs a few sparse column sums, well under a millisecond for tens of
thousands of chunks. The index is persisted next to the vectors by `search_engine.index`;
`save`/`load` only move files inside a directory the caller provides (and makes atomic).
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

# Bumped whenever tokenization, the document recipe, the scoring or the saved layout changes:
# `load` refuses an index saved by another version and the index rebuilds it.
LEXICAL_VERSION = 3
_META_FILE = "lexical.json"
_CHUNKS_DIR = "chunks"
_FILES_DIR = "files"

# BM25 parameters: Lucene's k1; b below the usual 0.75 because chunk lengths range from one
# line to a screenful, and full length normalization let one-line chunks outrank the function
# that is about the query (NDCG@10 +0.01 on the retrieval benchmark, flat from 0.3 to 0.5).
K1 = 1.2
B = 0.5

# How many times a chunk's path tokens are added to its document. Two makes a file-name match
# count about as much as a few mentions in the body, without drowning the body.
PATH_REPEAT = 2

logging.getLogger("bm25s").setLevel(logging.WARNING)


def lexical_document(chunk: Chunk) -> list[str]:
    """A chunk's BM25 tokens: its text, then its path tokens `PATH_REPEAT` times."""
    return tokenize_text(chunk.content) + path_tokens(chunk.path) * PATH_REPEAT


class _Bm25:
    """One bm25s index and the number of documents it scores (bm25s cannot hold zero)."""

    def __init__(self, bm25: bm25s.BM25 | None, size: int) -> None:
        self.bm25 = bm25
        self.size = size

    @classmethod
    def build(cls, documents: list[list[str]]) -> _Bm25:
        if not documents:
            return cls(None, 0)
        bm25 = bm25s.BM25(k1=K1, b=B, method="lucene")
        bm25.index(documents, show_progress=False)
        return cls(bm25, len(documents))

    def scores(self, terms: Sequence[str]) -> np.ndarray:
        if self.bm25 is None:
            return np.zeros(self.size, dtype=np.float32)
        ids = self.bm25.get_tokens_ids(list(terms))
        if not ids:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self.bm25.get_scores_from_ids(ids), dtype=np.float32)

    def save(self, directory: Path) -> None:
        if self.bm25 is not None:
            self.bm25.save(str(directory), show_progress=False)

    @classmethod
    def load(cls, directory: Path, size: int) -> _Bm25:
        if size == 0:
            return cls(None, 0)
        return cls(bm25s.BM25.load(str(directory), show_progress=False), size)


class LexicalIndex:
    """BM25 scores for a query's terms, per chunk (aligned with the chunk list it was built
    from, which the index keeps in order) and per file (aligned with `files`: the distinct
    chunk paths in order of first appearance)."""

    def __init__(self, chunks: _Bm25, files: _Bm25, file_paths: list[str]) -> None:
        self._chunks = chunks
        self._files = files
        self.files = file_paths

    @property
    def size(self) -> int:
        return self._chunks.size

    @classmethod
    def build(cls, chunks: Sequence[Chunk], documents: Sequence[list[str]] | None = None) -> LexicalIndex:
        """`documents`, each chunk's `lexical_document`, may be passed by a caller that kept
        them from an earlier build: an incremental update then tokenizes only new chunks."""
        chunk_docs = list(documents) if documents is not None else [lexical_document(c) for c in chunks]
        file_docs: dict[str, list[str]] = {}
        for chunk, doc in zip(chunks, chunk_docs):
            file_docs.setdefault(chunk.path, []).extend(doc)
        return cls(_Bm25.build(chunk_docs), _Bm25.build(list(file_docs.values())), list(file_docs))

    def scores(self, terms: Sequence[str]) -> np.ndarray:
        """BM25 score of every chunk (float32, length `size`); zero where no term occurs.
        Terms absent from the vocabulary are skipped: an all-unknown query scores zeros."""
        return self._chunks.scores(terms)

    def file_scores(self, terms: Sequence[str]) -> np.ndarray:
        """BM25 score of every file in `files` order, each file scored as one document."""
        return self._files.scores(terms)

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._chunks.save(directory / _CHUNKS_DIR)
        self._files.save(directory / _FILES_DIR)
        meta = {"version": LEXICAL_VERSION, "chunks": self._chunks.size, "files": self.files}
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
            files = [str(p) for p in meta["files"]]
            chunks = _Bm25.load(directory / _CHUNKS_DIR, int(meta["chunks"]))
            by_file = _Bm25.load(directory / _FILES_DIR, len(files))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IndexStoreError(f"cannot read the lexical index in {directory}: {exc}; rebuild the index") from exc
        return cls(chunks, by_file, files)
