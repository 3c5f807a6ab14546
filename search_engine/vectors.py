"""Chunk vectors at scale: int8 codes read by memory map, sign bits to find candidates fast.

Float32 vectors cost 1 KB per chunk (256 dims) on disk and, once a query has touched them all,
in memory: 460 MB at 450k chunks, and a brute-force product over all of them took most of a
warm hybrid query. Each vector is stored instead as

- `codes`: int8, the vector divided by its own scale (its largest component / 127), and that
  `scale` as float32: 260 bytes a chunk, cosines within ~0.003 of the float ones;
- `bits`: its signs, 32 bytes a chunk, kept column-major as uint64 words so the Hamming
  distance to a query's signs is four vectorised XOR + popcount passes.

A query ranks every allowed chunk by Hamming distance, rescores the `RESCORE` nearest with
their int8 codes (a dot product over a few thousand rows) and gives the rest a value below
every rescored one, still in Hamming order. Small indexes (at most `RESCORE` chunks) are
rescored whole, so below that size the result equals the int8 ranking exactly. The NDCG cost
of both approximations is measured in docs/benchmarks.md ("Scale").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Chunks rescored exactly per query. Hybrid search takes the top 100 of the semantic list;
# the sign bits of a 256-dim PCA'd static model keep ~all of those within the nearest 4,000.
RESCORE = 4000
_WORD_BITS = 64


def quantize(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes int8 (n, dim), scales float32 (n,), sign words uint64 (n, dim // 64)) of
    L2-normalized float vectors. A zero vector (a text without tokens) gets scale 0."""
    vectors = np.asarray(vectors, dtype=np.float32)
    peak = np.abs(vectors).max(axis=1) if len(vectors) and vectors.shape[1] else np.zeros(len(vectors), np.float32)
    scales = (peak / 127.0).astype(np.float32)
    safe = np.where(scales > 0, scales, 1.0)[:, None]
    codes = np.clip(np.rint(vectors / safe), -127, 127).astype(np.int8)
    # Signs of the codes, not of the floats: quantizing a dequantized vector (an update
    # keeping an edited file's unchanged chunks) then gives back the very same bits.
    return codes, scales, sign_words(codes)


def sign_words(vectors: np.ndarray) -> np.ndarray:
    """The vectors' sign bits packed into uint64 words, (n, dim // 64)."""
    dim = vectors.shape[1] if vectors.ndim == 2 else 0
    if dim % _WORD_BITS:
        raise ValueError(f"vector dimension {dim} is not a multiple of {_WORD_BITS}")
    packed = np.packbits(np.asarray(vectors) > 0, axis=1)
    return np.ascontiguousarray(packed).view(np.uint64).reshape(len(vectors), dim // _WORD_BITS)


@dataclass(frozen=True, slots=True)
class VectorIndex:
    """The quantized vectors of one index generation (arrays usually memory-mapped).

    `words` is column-major: `words[w]` holds word w of every chunk, contiguous.
    `file_vectors` (float32, one row per file with chunks, in chunk order) are the normalized
    means of each file's chunk vectors, computed from the float vectors at build time: what
    a file as a whole is about."""

    codes: np.ndarray
    scales: np.ndarray
    words: np.ndarray
    file_vectors: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.scales), int(self.codes.shape[1]) if self.codes.ndim == 2 else 0)

    def __len__(self) -> int:
        return len(self.scales)

    def rows(self, ids: np.ndarray | slice) -> np.ndarray:
        """Dequantized float32 vectors of the given rows."""
        return self.codes[ids].astype(np.float32) * self.scales[ids][:, None]

    def cosines(self, ids: np.ndarray, query: np.ndarray) -> np.ndarray:
        """The int8 cosine of each chunk in `ids` with `query` (normalized)."""
        return (self.codes[ids].astype(np.float32) @ np.asarray(query, dtype=np.float32)) * self.scales[ids]

    def hamming(self, query: np.ndarray) -> np.ndarray:
        """Hamming distance of every chunk's signs to the query's (uint16, length n)."""
        q = sign_words(np.asarray(query, dtype=np.float32)[None, :])[0]
        out = np.zeros(len(self), dtype=np.uint16)
        word = np.empty(len(self), dtype=np.uint64)
        count = np.empty(len(self), dtype=np.uint8)
        for w in range(self.words.shape[0]):
            np.bitwise_xor(self.words[w], q[w], out=word)
            np.bitwise_count(word, out=count)
            out += count
        return out

    def similarities(self, query: np.ndarray, allowed_ids: np.ndarray) -> np.ndarray:
        """A score per chunk (float32, length n) whose order over `allowed_ids` is: the
        `RESCORE` chunks nearest by sign bits, by int8 cosine, then the rest by Hamming
        distance, each below every rescored one. Rescored values are cosines in [-1, 1];
        the others lie in [-1.5, 1). Chunks not allowed score -2."""
        n = len(self)
        out = np.full(n, -2.0, dtype=np.float32)
        if len(allowed_ids) == 0:
            return out
        if len(allowed_ids) <= RESCORE:
            out[allowed_ids] = self.cosines(allowed_ids, query)
            return out
        dims = self.shape[1]
        distance = self.hamming(query)[allowed_ids]
        near = np.argpartition(distance, RESCORE - 1)[:RESCORE]
        rescored = allowed_ids[near]
        cos = self.cosines(rescored, query)
        floor = float(cos.min())
        out[allowed_ids] = floor - 0.001 - distance.astype(np.float32) / (2.0 * dims)
        out[rescored] = cos
        return out

    def top(self, query: np.ndarray, allowed_ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The `k` allowed chunks most similar to `query` (ids, int8 cosines), best first,
        ties to the lower id."""
        if len(allowed_ids) <= max(RESCORE, k):
            ids = allowed_ids
        else:
            distance = self.hamming(query)[allowed_ids]
            ids = allowed_ids[np.sort(np.argpartition(distance, RESCORE - 1)[:RESCORE])]
        sims = self.cosines(ids, query)
        k = min(k, len(ids))
        if k == 0:
            return ids[:0], sims[:0]
        top = np.argpartition(-sims, k - 1)[:k] if k < len(ids) else np.arange(len(ids))
        top = top[np.lexsort((ids[top], -sims[top]))]
        return ids[top], sims[top]


def empty(dim: int) -> VectorIndex:
    """The vectors of an index with no chunks."""
    return VectorIndex(np.zeros((0, dim), np.int8), np.zeros(0, np.float32), np.zeros((dim // _WORD_BITS, 0), np.uint64),
                       np.zeros((0, dim), np.float32))  # fmt: skip
