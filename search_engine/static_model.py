"""A static (model2vec) embedding model, loaded and applied without model2vec's per-text loop.

A static model's vector for a text is the mean of its tokens' rows in one table. model2vec
computes that text by text; on source code that is ~1,000 chunks/s here, and nearly all of it
is WordPiece tokenization, repeated for the same identifiers in every chunk. Code reuses its
words heavily (~10k distinct words in 100k lines), so this module tokenizes each distinct word
once and does the pooling as two sparse matrix products:

    texts x pieces (whitespace-separated)  @  pieces x words  @  words x vocab  @  vocab x dim

The result equals model2vec's `encode` (up to float rounding) except that nothing is
truncated: model2vec cuts texts at 512 tokens, and chunks are bounded anyway.

Why splitting first is exact: BERT-style pre-tokenization splits at whitespace and makes every
ASCII punctuation character its own word, so tokenizing a whitespace-free piece's runs in
isolation yields the same tokens as tokenizing the text. Non-ASCII runs (accents, CJK,
Unicode punctuation) go to the tokenizer whole, which splits them as it would in context.

The directory format is model2vec's (`model.safetensors` with an `embeddings` table,
`tokenizer.json`). A model with per-token weights or a token mapping is handed to model2vec
itself, which knows those variants.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import chain
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from tokenizers import Tokenizer

from search_engine.errors import ModelLoadError

# Up to this many texts (a query) are tokenized directly: building the sparse matrices costs
# ~1 ms, twenty times a direct tokenization of one query.
_FEW = 4
# One BERT word inside whitespace-free pieces joined by single spaces: a single ASCII
# punctuation character or a run of anything else; the space is matched as a boundary.
_WORD_OR_SPACE = re.compile(r" |[!-/:-@\[-`{-~]|[^\s!-/:-@\[-`{-~]+")


class StaticModel:
    """Mean-of-token-vectors embedding for the plain model2vec format, normalized rows."""

    def __init__(self, table: np.ndarray, tokenizer: Tokenizer) -> None:
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self._table = np.ascontiguousarray(table, dtype=np.float32)
        self._tokenizer = tokenizer
        unk = getattr(tokenizer.model, "unk_token", None)
        # model2vec drops unknown tokens rather than averaging in the [UNK] vector
        self._unk = tokenizer.token_to_id(unk) if isinstance(unk, str) else None
        self.dim = int(self._table.shape[1])

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32; each row the normalized mean of the text's token
        vectors (zeros for a text without tokens)."""
        if len(texts) <= _FEW:
            sums = np.zeros((len(texts), self.dim), dtype=np.float32)
            for row, text in enumerate(texts):
                sums[row] = self._table[self._token_ids(text)].sum(axis=0)
        else:
            sums = self._pooled(texts)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)  # mean then normalize == normalize
        return sums / np.where(norms > 0, norms, 1.0)

    def _token_ids(self, text: str) -> list[int]:
        ids = self._tokenizer.encode(text, add_special_tokens=False).ids
        return ids if self._unk is None else [i for i in ids if i != self._unk]

    def _pooled(self, texts: Sequence[str]) -> np.ndarray:
        """Token-vector sums of many texts, each distinct word tokenized once."""
        pieces, texts_pieces = _incidence(list(map(str.split, texts)))
        words, pieces_words = _words_of(pieces)
        vocab = self._table.shape[0]
        tokens = self._tokens(words)
        words_tokens = _sparse(list(map(len, tokens)), list(chain.from_iterable(tokens)), vocab)
        counts = (texts_pieces @ pieces_words @ words_tokens).tocsr()
        return np.asarray(counts @ self._table, dtype=np.float32)

    def _tokens(self, words: list[str]) -> list[list[int]]:
        encodings = self._tokenizer.encode_batch_fast(words, add_special_tokens=False)
        if self._unk is None:
            return [e.ids for e in encodings]
        unk = self._unk
        return [[i for i in e.ids if i != unk] for e in encodings]


def _incidence(rows: list[list[str]]) -> tuple[list[str], sp.csr_matrix]:
    """The distinct strings of `rows` and the rows x distinct count matrix. Iteration stays
    in C (dict.fromkeys, map): this runs over every piece of every chunk."""
    flat = list(chain.from_iterable(rows))
    ids = _ids(flat)
    return list(ids), _sparse(list(map(len, rows)), list(map(ids.__getitem__, flat)), len(ids))


def _words_of(pieces: list[str]) -> tuple[list[str], sp.csr_matrix]:
    """The distinct words of `pieces` and the pieces x words count matrix, from one regex
    pass over the pieces joined by spaces (pieces hold no whitespace, so each space found is
    a boundary): one call instead of one per piece."""
    if not pieces:
        return [], _sparse([], [], 0)
    flat = _WORD_OR_SPACE.findall(" ".join(pieces))
    ids = _ids(flat)
    codes = np.fromiter(map(ids.__getitem__, flat), dtype=np.int64, count=len(flat))
    boundary = codes == ids.get(" ", -1)
    edges = np.concatenate(([-1], np.flatnonzero(boundary), [len(codes)]))
    return list(ids), _sparse(np.diff(edges) - 1, codes[~boundary], len(ids))


def _ids(strings: list[str]) -> dict[str, int]:
    """Distinct strings numbered in order of first appearance."""
    ids: dict[str, int] = dict.fromkeys(strings, 0)
    for i, key in enumerate(ids):
        ids[key] = i
    return ids


def _sparse(lengths: Sequence[int] | np.ndarray, columns: Sequence[int] | np.ndarray, width: int) -> sp.csr_matrix:
    """Sparse count matrix whose row r holds `lengths[r]` consecutive entries of `columns`."""
    indptr = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(np.asarray(lengths, dtype=np.int64), out=indptr[1:])
    indices = np.asarray(columns, dtype=np.int64)
    data = np.ones(len(indices), dtype=np.float32)
    matrix = sp.csr_matrix((data, indices, indptr), shape=(len(lengths), width))
    matrix.sum_duplicates()
    return matrix


class _Model2Vec:
    """A model2vec variant with per-token weights or a token mapping, run by model2vec."""

    def __init__(self, directory: Path) -> None:
        from model2vec import StaticModel as Model2VecModel

        self._model = Model2VecModel.from_pretrained(directory, normalize=True)
        self.dim = int(self._model.dim)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        vectors = np.asarray(self._model.encode(list(texts), use_multiprocessing=False), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms > 0, norms, 1.0)


def load_static_model(directory: Path) -> StaticModel | _Model2Vec:
    """The model2vec-format model in `directory`. ModelLoadError if it cannot be read."""
    from safetensors.numpy import load_file

    try:
        tensors = load_file(directory / "model.safetensors")
        if set(tensors) != {"embeddings"}:
            return _Model2Vec(directory)
        return StaticModel(tensors["embeddings"], Tokenizer.from_file(str(directory / "tokenizer.json")))
    except ModelLoadError:
        raise
    except Exception as exc:  # safetensors, tokenizers and model2vec raise their own types
        raise ModelLoadError(f"cannot load static model from {directory}: {exc}") from exc
