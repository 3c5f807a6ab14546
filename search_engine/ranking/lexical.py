"""BM25 over chunks and over whole files: the exact-word signals of hybrid search.

Embeddings blur names: `ClientSession` and `ClientResponse` look alike to a static model, and a
rare identifier a query names outright is exactly what BM25's IDF rewards. Two granularities:

- per chunk, to find the function that talks about the query's words;
- per file (the concatenation of its chunks' documents), because a question such as "how is
  chunked transfer encoding parsed" spreads its words over a module (`chunked` in one method,
  `transfer encoding` in another) and only the file as a whole matches them all.

A chunk's document is its code tokens (`search_engine.ranking.code_tokens`) plus its path tokens,
repeated so a file named after the topic (`multipart.py` for "multipart handling") outweighs
a passing mention elsewhere.

Scoring is Lucene's BM25 (the formula `bm25s` implements, which this module used before) over
postings kept as flat arrays, term-major: for each term the chunks it occurs in and how often.
A query reads the postings of its few terms and adds their scores with numpy, so its cost
follows the length of those postings, never the number of chunks times Python. The arrays
are written as `.npy` files and memory-mapped on load, so opening an index reads only the
vocabulary. An index is built one chunk at a time (`LexicalBuilder`): a build never holds
every chunk's token list, and an update merges the new chunks' entries into the previous
generation's postings instead of tokenizing unchanged chunks again
(`search_engine.index.postings_merge`; the vocabulary only grows between generations, so term ids
stay valid). `save`/`load` only move files inside a directory the
caller provides (and makes atomic).
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import msgspec
import numpy as np

from search_engine.chunking.chunk import Chunk
from search_engine.errors import IndexDamagedError, reading
from search_engine.index.arrays import load_array
from search_engine.index.packed import Natural, pack, unpack, unpack_json
from search_engine.ranking.code_tokens import path_tokens, tokenize_text

# Bumped whenever tokenization, the document recipe, the scoring or the saved layout changes:
# `load` refuses an index saved by another version and the index rebuilds it.
LEXICAL_VERSION = 4
_META_FILE = "lexical.json"
_VOCAB_FILE = "vocab.msgpack"


class _Version(msgspec.Struct):
    """lexical.json's version alone: read first, as another version's fields may differ."""

    version: int | str | None = None


class _Meta(msgspec.Struct):
    """lexical.json: the format version, the chunk count, the files in postings order."""

    version: int
    chunks: Natural
    files: list[str]


_CHUNKS = "chunks"
_FILES = "files"
# Term frequencies are stored as uint16 per chunk; a chunk repeating a token more often
# than this counts it this often (BM25 has long saturated by then).
_MAX_TF = 65535

# BM25 parameters: Lucene's k1; b below the usual 0.75 because chunk lengths range from one
# line to a screenful, and full length normalization let one-line chunks outrank the function
# that is about the query (NDCG@10 +0.01 on the retrieval benchmark, flat from 0.3 to 0.5).
K1 = 1.2
B = 0.5

# How many times a chunk's path tokens are added to its document. Two makes a file-name match
# count about as much as a few mentions in the body, without drowning the body.
PATH_REPEAT = 2

# Chunk entries grouped into per-file entries at a time (`file_entries`): bounds that step's
# temporaries to a few tens of MB whatever the index's size.
FILE_BLOCK = 1 << 21


def lexical_document(chunk: Chunk) -> list[str]:
    """A chunk's BM25 tokens: its text, then its path tokens `PATH_REPEAT` times."""
    return tokenize_text(chunk.content) + path_tokens(chunk.path) * PATH_REPEAT


_PARTS = ("indptr", "docs", "tf", "lengths")


class Postings:
    """BM25 postings of one granularity (chunks or files), term-major.

    `indptr[t]:indptr[t + 1]` are term t's entries in `docs` (ascending document ids) and
    `tf` (its frequency there); `lengths` are the documents' token counts. Document frequency
    and IDF come from `indptr`, so nothing derived is stored."""

    def __init__(self, indptr: np.ndarray, docs: np.ndarray, tf: np.ndarray, lengths: np.ndarray) -> None:
        self.indptr, self.docs, self.tf, self.lengths = indptr, docs, tf, lengths
        self.size = len(lengths)
        df = np.diff(np.asarray(indptr, dtype=np.int64)).astype(np.float64)
        self._idf = np.log1p((self.size - df + 0.5) / (df + 0.5)).astype(np.float32)
        avg = float(np.mean(lengths)) if self.size else 1.0
        # BM25's length normalisation per document: k1 * (1 - b + b * length / average).
        self._norm = (K1 * ((1.0 - B) + B * np.asarray(lengths, dtype=np.float32) / max(avg, 1e-9))).astype(np.float32)

    @classmethod
    def from_triples(
        cls, docs: np.ndarray, terms: np.ndarray, tf: np.ndarray, lengths: np.ndarray, vocab: int
    ) -> Postings:
        """From (document, term, frequency) entries with each (document, term) at most once,
        in ascending document order."""
        order = np.argsort(terms, kind="stable")  # stable: documents stay ascending per term
        indptr = np.zeros(vocab + 1, dtype=np.int64)
        np.cumsum(np.bincount(terms, minlength=vocab), out=indptr[1:])
        return cls(indptr, docs[order].astype(np.int32), tf[order], lengths)

    def scores(self, ids: Sequence[int]) -> np.ndarray:
        """Sum over the term ids (repeats count again, as in the query) of each document's BM25."""
        out = np.zeros(self.size, dtype=np.float32)
        for t in ids:
            start, end = int(self.indptr[t]), int(self.indptr[t + 1])
            if start == end:
                continue
            docs = self.docs[start:end]
            tf = self.tf[start:end].astype(np.float32)
            out[docs] += self._idf[t] * tf / (self._norm[docs] + tf)
        return out

    def beside(self, base: Postings, in_base: np.ndarray) -> Postings:
        """These postings (a few documents) scored with the BM25 statistics of `base` and these
        together, so their documents score as they would in one index holding both (document
        counts, frequencies and lengths summed; the documents of `base` these replace are
        still counted). `in_base[t]` is term t's id in `base`, -1 if it has none."""
        out = Postings(self.indptr, self.docs, self.tf, self.lengths)
        df = np.diff(np.asarray(self.indptr, dtype=np.int64)).astype(np.float64)
        known = in_base >= 0
        base_bounds = np.asarray(base.indptr, dtype=np.int64)
        df[known] += base_bounds[in_base[known] + 1] - base_bounds[in_base[known]]
        size = base.size + self.size
        out._idf = np.log1p((size - df + 0.5) / (df + 0.5)).astype(np.float32)
        total = float(np.sum(base.lengths, dtype=np.int64)) + float(np.sum(self.lengths, dtype=np.int64))
        norm = K1 * ((1.0 - B) + B * np.asarray(self.lengths, dtype=np.float32) / max(total / max(size, 1), 1e-9))
        out._norm = norm.astype(np.float32)
        return out

    def save(self, directory: Path, name: str) -> None:
        for part in _PARTS:
            np.save(directory / f"{name}.{part}.npy", np.ascontiguousarray(getattr(self, part)))

    @classmethod
    def load(cls, directory: Path, name: str) -> Postings:
        """What `save` wrote, memory-mapped; ValueError unless its columns are integers that
        index what they claim to (a crafted document id past the last document, or a float
        one, failed every search with an IndexError instead of a rebuild)."""
        indptr, docs, tf, lengths = (load_array(directory / f"{name}.{part}.npy") for part in _PARTS)
        if not all(np.issubdtype(a.dtype, np.integer) for a in (indptr, docs, tf, lengths)) or indptr.ndim != 1:
            raise ValueError(f"{name} postings are not integer columns")
        bounds = np.asarray(indptr, dtype=np.int64)
        if len(bounds) and (bounds[0] != 0 or bounds[-1] != len(docs) or np.any(np.diff(bounds) < 0)):
            raise ValueError(f"{name} postings' offsets do not walk their entries")
        if (len(docs) and (int(docs.min()) < 0 or int(docs.max()) >= len(lengths))) or len(tf) != len(docs):
            raise ValueError(f"{name} postings name documents that are not there")
        return cls(indptr, docs, tf, lengths)


class Lexical(Protocol):
    """What ranking reads of BM25: one generation's (`LexicalIndex`) or a generation's beside
    the live files' (`JoinedLexical`)."""

    def matching(self, terms: Sequence[str], allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]: ...

    def file_scores(self, terms: Sequence[str]) -> np.ndarray: ...


class LexicalIndex:
    """BM25 scores for a query's terms, per chunk (aligned with the chunk list it was built
    from, which the index keeps in order) and per file (aligned with `files`: the distinct
    chunk paths in order of first appearance)."""

    def __init__(self, tokens: list[str], chunks: Postings, files: Postings, file_paths: list[str]) -> None:
        self.tokens = tokens
        self._ids = {t: i for i, t in enumerate(tokens)}
        self._chunks = chunks
        self._files = files
        self.files = file_paths

    @property
    def size(self) -> int:
        return self._chunks.size

    @classmethod
    def build(cls, chunks: Sequence[Chunk], documents: Sequence[list[str]] | None = None) -> LexicalIndex:
        """The index of `chunks`; `documents`, each chunk's `lexical_document`, when the
        caller has them already."""
        builder = LexicalBuilder()
        for i, chunk in enumerate(chunks):
            builder.add(chunk.path, documents[i] if documents is not None else lexical_document(chunk))
        return builder.finish()

    def term_ids(self, terms: Sequence[str]) -> list[int]:
        """Ids of the known terms, in order (repeats kept); unknown terms are skipped."""
        return [i for t in terms if (i := self._ids.get(t)) is not None]

    def scores(self, terms: Sequence[str]) -> np.ndarray:
        """BM25 score of every chunk (float32, length `size`); zero where no term occurs.
        Terms absent from the vocabulary are skipped: an all-unknown query scores zeros."""
        return self._chunks.scores(self.term_ids(terms))

    def matching(self, terms: Sequence[str], allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """The chunks some term occurs in (ids ascending) among those `allowed` (a boolean
        mask; None: every chunk), with their BM25 scores: every chunk with a positive score,
        so a caller ranks these few instead of the whole index."""
        scores = self.scores(terms)
        ids = np.flatnonzero(scores > 0)  # a bool mask: numpy finds its nonzeros ~5x faster
        if allowed is not None:
            ids = ids[allowed[ids]]
        return ids, scores[ids]

    def file_scores(self, terms: Sequence[str]) -> np.ndarray:
        """BM25 score of every file in `files` order, each file scored as one document."""
        return self._files.scores(self.term_ids(terms))

    @property
    def chunk_postings(self) -> Postings:
        """The per-chunk postings (what an update merges into the next generation's)."""
        return self._chunks

    @property
    def file_postings(self) -> Postings:
        """The per-file postings, aligned with `files`."""
        return self._files

    def beside(self, base: LexicalIndex) -> LexicalIndex:
        """This index (a few live files) scored with the statistics of `base` and this
        together (`Postings.beside`)."""
        in_base = np.fromiter((base._ids.get(t, -1) for t in self.tokens), dtype=np.int64, count=len(self.tokens))
        return LexicalIndex(
            self.tokens,
            self._chunks.beside(base._chunks, in_base),
            self._files.beside(base._files, in_base),
            self.files,
        )

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._chunks.save(directory, _CHUNKS)
        self._files.save(directory, _FILES)
        (directory / _VOCAB_FILE).write_bytes(pack(self.tokens))
        meta = _Meta(version=LEXICAL_VERSION, chunks=self._chunks.size, files=self.files)
        (directory / _META_FILE).write_bytes(msgspec.json.encode(meta))

    @classmethod
    def load(cls, directory: Path) -> LexicalIndex:
        """Open what `save` wrote (postings memory-mapped). IndexDamagedError if it is missing,
        damaged or of another `LEXICAL_VERSION` than its generation's format implies (the
        caller rebuilds)."""
        with reading("the lexical index", directory):
            raw = (directory / _META_FILE).read_bytes()
            version = unpack_json(raw, _Version).version
            if version != LEXICAL_VERSION:
                raise IndexDamagedError(
                    f"lexical index in {directory} has version {version}, "
                    f"this codepager writes {LEXICAL_VERSION}; the next update rebuilds the index",
                    directory,
                )
            meta = unpack_json(raw, _Meta)
            files = meta.files
            tokens = unpack((directory / _VOCAB_FILE).read_bytes(), list[str])
            chunks = Postings.load(directory, _CHUNKS)
            by_file = Postings.load(directory, _FILES)
        if chunks.size != meta.chunks or by_file.size != len(files) or len(chunks.indptr) != len(tokens) + 1:
            raise IndexDamagedError(
                f"cannot read the lexical index in {directory}: its parts disagree; the next update rebuilds the index",
                directory,
            )
        return cls(tokens, chunks, by_file, files)


class LexicalBuilder:
    """Builds a `LexicalIndex` one chunk at a time, in chunk order.

    Each chunk leaves only its distinct term ids and frequencies behind (a few bytes per
    distinct token), never its token list. Starting from a previous generation's `tokens`
    keeps its term ids, so an update's new rows merge into that generation's postings
    (`search_engine.index.postings_merge`)."""

    def __init__(self, tokens: Sequence[str] = ()) -> None:
        self._tokens = list(tokens)
        self._ids = {t: i for i, t in enumerate(self._tokens)}
        self._terms = array("i")
        self._tf = array("H")
        self._row_nnz = array("i")
        self._lengths = array("i")
        self._file_of = array("i")
        self._files: list[str] = []

    def _file(self, path: str) -> int:
        if not self._files or self._files[-1] != path:
            self._files.append(path)
        return len(self._files) - 1

    def add(self, path: str, document: list[str]) -> None:
        """The next chunk, from its lexical document."""
        counts = Counter(document)
        ids = self._ids
        for token in counts:
            if token not in ids:
                ids[token] = len(self._tokens)
                self._tokens.append(token)
        self._terms.extend(ids[t] for t in counts)
        self._tf.extend(min(c, _MAX_TF) for c in counts.values())
        self._row_nnz.append(len(counts))
        self._lengths.append(len(document))
        self._file_of.append(self._file(path))

    @property
    def tokens(self) -> list[str]:
        """The vocabulary so far: the starting tokens, then each new one as first seen."""
        return self._tokens

    @property
    def paths(self) -> list[str]:
        """The distinct paths of the chunks added, in order."""
        return self._files

    def file_of(self) -> np.ndarray:
        """Each chunk's index into `paths`."""
        return np.frombuffer(self._file_of, dtype=np.int32) if self._file_of else np.zeros(0, np.int32)

    def rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(chunk, term, frequency) entries in chunk order, and each chunk's token count."""
        row_nnz = np.frombuffer(self._row_nnz, dtype=np.int32) if self._row_nnz else np.zeros(0, np.int32)
        docs = np.repeat(np.arange(len(row_nnz), dtype=np.int32), row_nnz)
        terms = np.frombuffer(self._terms, dtype=np.int32) if self._terms else np.zeros(0, np.int32)
        tf = np.frombuffer(self._tf, dtype=np.uint16) if self._tf else np.zeros(0, np.uint16)
        lengths = np.frombuffer(self._lengths, dtype=np.int32) if self._lengths else np.zeros(0, np.int32)
        return docs, terms, tf, lengths

    def finish(self) -> LexicalIndex:
        vocab = len(self._tokens)
        docs, terms, tf, lengths = self.rows()
        chunks = Postings.from_triples(docs, terms, tf, lengths.copy(), vocab)
        f_docs, f_terms, f_tf, _ids, f_lengths = file_entries(self.file_of(), docs, terms, tf, lengths, vocab)
        files = Postings.from_triples(f_docs, f_terms, f_tf, f_lengths, vocab)
        return LexicalIndex(list(self._tokens), chunks, files, list(self._files))


class JoinedLexical:
    """A generation's BM25 (`base`, chunk and file ids from 0) followed by the live files'
    (`live`, made with `LexicalIndex.beside(base)`, ids after the base's)."""

    def __init__(self, base: LexicalIndex, live: LexicalIndex) -> None:
        self.base, self.live = base, live

    def matching(self, terms: Sequence[str], allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        n = self.base.size
        ids, scores = self.base.matching(terms, None if allowed is None else allowed[:n])
        live_ids, live_scores = self.live.matching(terms, None if allowed is None else allowed[n:])
        return np.concatenate([ids, live_ids + n]), np.concatenate([scores, live_scores])

    def file_scores(self, terms: Sequence[str]) -> np.ndarray:
        return np.concatenate([self.base.file_scores(terms), self.live.file_scores(terms)])


def file_entries(
    file_of: np.ndarray, docs: np.ndarray, terms: np.ndarray, tf: np.ndarray, lengths: np.ndarray, vocab: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-file (file, term, frequency) entries in ascending (file, term) order, the files
    present and their token counts, from chunk entries in chunk order (`docs` ascending,
    indexing `file_of`, which ascends too, and `lengths`). A file is the concatenation of its
    chunks' documents: its frequencies are the sums over its chunks of each (file, term)
    pair's. Sorted `FILE_BLOCK` entries at a time, cut between files, so the 8-byte keys
    never exist for the whole index at once (at 8x sympy, 12.6M entries, they were ~400 MB
    of the build's peak)."""
    width = max(vocab, 1)
    files = file_of[docs]
    keys, file_tf = [np.zeros(0, np.int64)], [np.zeros(0, np.uint32)]
    start = 0
    while start < len(files):
        end = min(start + FILE_BLOCK, len(files))
        end = int(np.searchsorted(files, files[end - 1], side="right"))  # the last file whole
        pairs = files[start:end].astype(np.int64) * width + terms[start:end]
        order = np.argsort(pairs, kind="stable")
        pairs = pairs[order]
        starts = np.flatnonzero(np.r_[True, pairs[1:] != pairs[:-1]])
        keys.append(pairs[starts])
        file_tf.append(np.add.reduceat(tf[start:end][order].astype(np.uint32), starts))
        start = end
    all_keys = np.concatenate(keys)
    ids, inverse = np.unique(file_of, return_inverse=True)
    file_lengths = np.bincount(inverse, weights=lengths, minlength=len(ids)).astype(np.int32)
    return (
        (all_keys // width).astype(np.int32),
        (all_keys % width).astype(np.int32),
        np.concatenate(file_tf),
        ids,
        file_lengths,
    )
