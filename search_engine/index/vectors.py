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
of both approximations is measured in docs/benchmarks.md ("Scale"). A large index (from
`coarse.MIN_CHUNKS` chunks) also has a coarse quantizer (`search_engine.index.coarse`): the Hamming
pass then covers only the chunks of the lists nearest to the query, so a query's cost stops
growing with the index. A query's result (`Nearest`) holds only the rescored chunks: nothing
as long as the index is allocated per query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from search_engine.index import coarse
from search_engine.index.coarse import CoarseIndex

# Chunks rescored exactly per query. Hybrid search takes the top 100 of the semantic list;
# the sign bits of a 256-dim PCA'd static model keep ~all of those within the nearest 4,000.
RESCORE = 4000
# Rows cast to float32 at a time for a cosine: 256 KB, reused, where casting all 4,000 rescored
# rows at once wrote a fresh 4 MB array per query, pushing the rest of the query's arrays out
# of the core's cache.
_COSINE_BLOCK = 256
#: Sign bits per packed word of `words.bin` (the index store lays the words out by it).
WORD_BITS = 64


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
    if dim % WORD_BITS:
        raise ValueError(f"vector dimension {dim} is not a multiple of {WORD_BITS}")
    packed = np.packbits(np.asarray(vectors) > 0, axis=1)
    return np.ascontiguousarray(packed).view(np.uint64).reshape(len(vectors), dim // WORD_BITS)


class Vectors(Protocol):
    """What ranking reads of chunk vectors: one generation's (`VectorIndex`) or a generation's
    beside the live files' (`JoinedVectors`)."""

    @property
    def shape(self) -> tuple[int, int]: ...

    def cosines(self, ids: np.ndarray, query: np.ndarray) -> np.ndarray: ...

    def hamming(self, query: np.ndarray, ids: np.ndarray | None = None) -> np.ndarray: ...

    def nearest(self, query: np.ndarray, allowed: np.ndarray | None, want: int) -> Nearest: ...


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
    coarse: CoarseIndex | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.scales), int(self.codes.shape[1]) if self.codes.ndim == 2 else 0)

    def __len__(self) -> int:
        return len(self.scales)

    def rows(self, ids: np.ndarray | slice) -> np.ndarray:
        """Dequantized float32 vectors of the given rows."""
        rows: np.ndarray = self.codes[ids].astype(np.float32) * self.scales[ids][:, None]
        return rows

    def cosines(self, ids: np.ndarray, query: np.ndarray) -> np.ndarray:
        """The int8 cosine of each chunk in `ids` with `query` (normalized), computed a block
        of rows at a time (`_COSINE_BLOCK`)."""
        query = np.asarray(query, dtype=np.float32)
        cosines = np.empty(len(ids), dtype=np.float32)
        block = np.empty((min(len(ids), _COSINE_BLOCK), self.codes.shape[1]), dtype=np.float32)
        for start in range(0, len(ids), _COSINE_BLOCK):
            rows = ids[start : start + _COSINE_BLOCK]
            floats = block[: len(rows)]
            floats[...] = self.codes[rows]
            np.matmul(floats, query, out=cosines[start : start + len(rows)])
        cosines *= self.scales[ids]
        return cosines

    def hamming(self, query: np.ndarray, ids: np.ndarray | None = None) -> np.ndarray:
        """Hamming distance of the chunks' signs to the query's (uint16): of every chunk, or of
        the chunks `ids` only."""
        q = sign_words(np.asarray(query, dtype=np.float32)[None, :])[0]
        size = len(self) if ids is None else len(ids)
        out = np.zeros(size, dtype=np.uint16)
        word = np.empty(size, dtype=np.uint64)
        count = np.empty(size, dtype=np.uint8)
        for w in range(self.words.shape[0]):
            column = self.words[w] if ids is None else self.words[w][ids]
            np.bitwise_xor(column, q[w], out=word)
            np.bitwise_count(word, out=count)
            out += count
        return out

    def nearest(self, query: np.ndarray, allowed: np.ndarray | None, want: int) -> Nearest:
        """The chunks `allowed` (a boolean mask; None: every chunk) nearest to `query`: all of
        them when there are at most `max(RESCORE, want)`, else that many chosen by sign bits
        among every allowed chunk or, in an index with a coarse quantizer, among the chunks
        of the lists nearest to the query (`search_engine.index.coarse`), then ranked by int8
        cosine."""
        allowed_ids = None if allowed is None else np.flatnonzero(allowed)
        count = len(self) if allowed_ids is None else len(allowed_ids)
        rescore = max(RESCORE, want)
        probe = max(coarse.PROBE_CHUNKS, rescore)
        every: np.ndarray | None = None  # every chunk's distance, when the pass covered them all
        if count <= rescore:
            ids = np.arange(count) if allowed_ids is None else allowed_ids
        elif self.coarse is not None and count > probe:
            pool = self.coarse.probe(query, allowed, probe)
            ids = pool if len(pool) <= rescore else pool[_nearest_signs(self.hamming(query, pool), rescore)]
        else:
            distances = self.hamming(query, allowed_ids)
            ids = _nearest_signs(distances, rescore)
            if allowed_ids is None:
                every = distances
            else:
                ids = allowed_ids[ids]
        sims = self.cosines(ids, query)
        return Nearest(ids, sims, self, np.asarray(query, dtype=np.float32), every)


def _nearest_signs(distances: np.ndarray, k: int) -> np.ndarray:
    """Positions of the `k` smallest `distances` (Hamming, to the query's sign bits),
    ascending: put in order by a mask over the positions, one pass, where sorting the k cost
    twice the selection (~0.1 ms at 4,000)."""
    picked = np.zeros(len(distances), dtype=bool)
    picked[np.argpartition(distances, k - 1)[:k]] = True
    return np.flatnonzero(picked)


@dataclass(frozen=True, slots=True)
class Nearest:
    """A query's rescored chunks, `ids` ascending with their int8 `cosines` (a caller
    wanting a few best ones selects them; `ranked` sorts them all). Every other chunk ranks
    below all of them, in Hamming order (`at`)."""

    ids: np.ndarray
    cosines: np.ndarray
    vectors: Vectors
    query: np.ndarray
    #: Every chunk's Hamming distance to the query when the search measured them all (no
    #: path filter, no coarse lists), so `at` looks its misses up instead of measuring them
    #: again (~1,500 a warm hybrid query); None: `at` measures those it needs.
    distances: np.ndarray | None = None

    def at(self, ids: np.ndarray) -> np.ndarray:
        """A value per chunk in `ids` (float32) in the order the query ranks them: the int8
        cosine of a rescored chunk; for any other, a value below every rescored one that
        falls with its Hamming distance to the query (within [-1.5, 1))."""
        ids = np.asarray(ids, dtype=np.int64)
        known = self.ids
        pos = np.minimum(np.searchsorted(known, ids), max(len(known) - 1, 0))
        hit = known[pos] == ids if len(known) else np.zeros(len(ids), dtype=bool)
        out = np.empty(len(ids), dtype=np.float32)
        out[hit] = self.cosines[pos[hit]]
        miss = np.flatnonzero(~hit)
        if len(miss):
            floor = float(self.cosines.min()) if len(self.cosines) else 0.0
            dims = self.vectors.shape[1]
            away = ids[miss]
            distance = self.distances[away] if self.distances is not None else self.vectors.hamming(self.query, away)
            out[miss] = floor - 0.001 - distance.astype(np.float32) / (2.0 * dims)
        return out

    def ranked(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, cosines) best first, ties to the lower id."""
        best = np.lexsort((self.ids, -self.cosines))
        return self.ids[best], self.cosines[best]


@dataclass(frozen=True, slots=True)
class JoinedVectors:
    """A generation's vectors (`base`, ids from 0) followed by the live files' (`live`, ids
    from `len(base)`), ranked as one: the base's rescored chunks and every allowed live chunk
    (a few files: all rescored), by the same int8 cosines."""

    base: VectorIndex
    live: VectorIndex

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.base) + len(self.live), self.base.shape[1])

    def _split(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions in `ids` of base and of live chunks."""
        live = ids >= len(self.base)
        return np.flatnonzero(~live), np.flatnonzero(live)

    def cosines(self, ids: np.ndarray, query: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        b, v = self._split(ids)
        out = np.empty(len(ids), dtype=np.float32)
        out[b] = self.base.cosines(ids[b], query)
        out[v] = self.live.cosines(ids[v] - len(self.base), query)
        return out

    def hamming(self, query: np.ndarray, ids: np.ndarray | None = None) -> np.ndarray:
        ids = np.arange(self.shape[0]) if ids is None else np.asarray(ids, dtype=np.int64)
        b, v = self._split(ids)
        out = np.empty(len(ids), dtype=np.uint16)
        out[b] = self.base.hamming(query, ids[b])
        out[v] = self.live.hamming(query, ids[v] - len(self.base))
        return out

    def nearest(self, query: np.ndarray, allowed: np.ndarray | None, want: int) -> Nearest:
        n = len(self.base)
        found = self.base.nearest(query, None if allowed is None else allowed[:n], want)
        live = np.arange(len(self.live)) if allowed is None else np.flatnonzero(allowed[n:])
        ids = np.concatenate([found.ids, live + n])
        cosines = np.concatenate([found.cosines, self.live.cosines(live, query)])
        return Nearest(ids, cosines, self, np.asarray(query, dtype=np.float32))


def empty(dim: int) -> VectorIndex:
    """The vectors of an index with no chunks."""
    return VectorIndex(
        np.zeros((0, dim), np.int8),
        np.zeros(0, np.float32),
        np.zeros((dim // WORD_BITS, 0), np.uint64),
        np.zeros((0, dim), np.float32),
    )
