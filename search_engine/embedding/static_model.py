"""A static (model2vec-format) embedding model, applied without model2vec's per-text loop.

A static model's vector for a text is the mean of its tokens' rows in one table. model2vec
computes that text by text; on source code that is ~1,000 chunks/s here, and nearly all of it
is WordPiece tokenization, repeated for the same identifiers in every chunk. Code reuses its
words heavily (~10k distinct words in 100k lines), so this module tokenizes each distinct word
once and sums bottom-up, each level over distinct items only:

    word vector  = sum of its tokens' rows
    piece vector = sum of its words' vectors   (a piece: a whitespace-free run)
    text vector  = sum of its pieces' vectors, then normalized (== the normalized mean)

The result equals model2vec's `encode` (up to float rounding) except that nothing is
truncated: model2vec cuts texts at 512 tokens, and chunks are bounded anyway. It needs numpy and
tokenizers only (no scipy: sparse products were the same sums, for 140 MB more install).

Why splitting first is exact: BERT-style pre-tokenization splits at whitespace and makes every
ASCII punctuation character its own word, so tokenizing a whitespace-free piece's runs in
isolation yields the same tokens as tokenizing the text. Non-ASCII runs (accents, CJK,
Unicode punctuation) go to the tokenizer whole, which splits them as it would in context.

The directory format is model2vec's: `model.safetensors` with an `embeddings` table (any
float or int8 dtype), optional per-token `weights` and `mapping` (token id -> table row), and
`tokenizer.json`. Weights and mapping are folded into one float32 row per token at load, which
is exactly how model2vec applies them to a mean.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import chain
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from search_engine.errors import ModelLoadError

# Up to this many texts (a query) are tokenized directly: building the word tables costs
# ~1 ms, twenty times a direct tokenization of one query.
_FEW = 4
# Rows gathered at once by `_segment_sums`: bounds its temporary to ~4 MB at 256 dims.
_GATHER_ROWS = 4096
# One BERT word inside whitespace-free pieces joined by single spaces: a single ASCII
# punctuation character or a run of anything else; the space is matched as a boundary.
_WORD_OR_SPACE = re.compile(r" |[!-/:-@\[-`{-~]|[^\s!-/:-@\[-`{-~]+")


class StaticModel:
    """Mean-of-token-vectors embedding over one float32 row per token id, normalized rows."""

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
        pieces, text_pieces = _incidence(list(map(str.split, texts)))
        words, piece_words = _words_of(pieces)
        tokens = self._tokens(words)
        word_tokens = (
            np.fromiter(map(len, tokens), np.int64, len(tokens)),
            np.fromiter(chain.from_iterable(tokens), np.int64),
        )
        word_vectors = _segment_sums(self._table, *word_tokens)
        piece_vectors = _segment_sums(word_vectors, *piece_words)
        return _segment_sums(piece_vectors, *text_pieces)

    def _tokens(self, words: list[str]) -> list[list[int]]:
        encodings = self._tokenizer.encode_batch_fast(words, add_special_tokens=False)
        if self._unk is None:
            return [e.ids for e in encodings]
        unk = self._unk
        return [[i for i in e.ids if i != unk] for e in encodings]


# A segment list: (lengths, members) where item i is members[sum(lengths[:i]):][:lengths[i]].
Segments = tuple[np.ndarray, np.ndarray]


def _incidence(rows: list[list[str]]) -> tuple[list[str], Segments]:
    """The distinct strings of `rows` and each row as a segment of their numbers. Iteration
    stays in C (dict.fromkeys, map): this runs over every piece of every chunk."""
    flat = list(chain.from_iterable(rows))
    ids = _ids(flat)
    lengths = np.fromiter(map(len, rows), np.int64, len(rows))
    return list(ids), (lengths, np.fromiter(map(ids.__getitem__, flat), np.int64, len(flat)))


def _words_of(pieces: list[str]) -> tuple[list[str], Segments]:
    """The distinct words of `pieces` and each piece as a segment of word numbers, from one
    regex pass over the pieces joined by spaces (pieces hold no whitespace, so each space
    found is a boundary): one call instead of one per piece."""
    if not pieces:
        return [], (np.zeros(0, np.int64), np.zeros(0, np.int64))
    flat = _WORD_OR_SPACE.findall(" ".join(pieces))
    ids = _ids(flat)
    codes = np.fromiter(map(ids.__getitem__, flat), dtype=np.int64, count=len(flat))
    boundary = codes == ids.get(" ", -1)
    edges = np.concatenate(([-1], np.flatnonzero(boundary), [len(codes)]))
    return list(ids), (np.diff(edges) - 1, codes[~boundary])


def _ids(strings: list[str]) -> dict[str, int]:
    """Distinct strings numbered in order of first appearance."""
    return {key: i for i, key in enumerate(dict.fromkeys(strings))}


def _segment_sums(rows: np.ndarray, lengths: np.ndarray, members: np.ndarray) -> np.ndarray:
    """(len(lengths), dim) float32: row i sums `rows[members[j]]` over segment i's j (zeros
    for an empty segment).

    Segments of one length are summed together as one (n, length, dim) gather reduced over its
    middle axis, a contiguous sum; `np.add.reduceat` over ragged segments measured ~8x slower
    here. Each gather holds about `_GATHER_ROWS` rows (more only for a longer single segment),
    so memory stays bounded whatever the batch."""
    out = np.zeros((len(lengths), rows.shape[1]), dtype=np.float32)
    starts = np.cumsum(lengths) - lengths
    order = np.argsort(lengths, kind="stable")
    edges = np.flatnonzero(np.diff(lengths[order])) + 1
    for group in np.split(order, edges):
        length = int(lengths[group[0]]) if len(group) else 0
        if length == 0:
            continue
        step = max(1, _GATHER_ROWS // length)
        offsets = np.arange(length)
        ones = np.ones(length, dtype=np.float32)  # ones @ (n, length, dim): BLAS, ~1.6x .sum(axis=1)
        for first in range(0, len(group), step):
            segments = group[first : first + step]
            out[segments] = ones @ rows[members[starts[segments][:, None] + offsets]]
    return out


def load_static_model(directory: Path) -> StaticModel:
    """The model2vec-format model in `directory`. ModelLoadError if it cannot be read."""
    from safetensors.numpy import load_file

    try:
        tensors = load_file(directory / "model.safetensors")
        tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        table = _token_table(tensors)
        if table.shape[0] != tokenizer.get_vocab_size():
            raise ModelLoadError(f"{table.shape[0]} table rows for a vocabulary of {tokenizer.get_vocab_size()} tokens")
        return StaticModel(table, tokenizer)
    except ModelLoadError:
        raise
    except Exception as exc:  # safetensors and tokenizers raise their own types
        raise ModelLoadError(f"cannot load static model from {directory}: {exc}") from exc


def _token_table(tensors: dict[str, np.ndarray]) -> np.ndarray:
    """One float32 row per token id: `embeddings[mapping[id]] * weights[id]`, model2vec's
    reading of the format (each token's row is weighted before the mean)."""
    unknown = set(tensors) - {"embeddings", "weights", "mapping"}
    if "embeddings" not in tensors or unknown:
        raise ModelLoadError(
            f"not a model2vec table: tensors {sorted(tensors)}, expected embeddings [weights] [mapping]"
        )
    table = tensors["embeddings"].astype(np.float32)
    if "mapping" in tensors:
        table = table[tensors["mapping"].astype(np.int64)]
    if "weights" in tensors:
        table *= tensors["weights"].astype(np.float32)[:, None]
    return table
