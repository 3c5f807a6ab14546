"""A coarse quantizer (an inverted file, IVF) over the chunk vectors of a large index.

Below `MIN_CHUNKS` a query's vector candidates come from the sign bits of every allowed chunk
(`search_engine.index.vectors`): a pass over 32 bytes a chunk, a few milliseconds at 100k chunks but
linear in the index. Above it, the chunks are partitioned once into `list_count(n)` lists
(four times the square root of n) by spherical k-means over a sample of their vectors; each list is
the chunks nearest to its centroid. A query ranks the centroids (a few hundred dot products),
takes the chunks of the nearest lists until it holds `PROBE_CHUNKS` of them, and only those
go on to the sign-bit and int8 rescoring. A query's cost then follows `PROBE_CHUNKS`, not the
size of the index.

Stored per generation (written by `write`, called once when a generation is published):

    coarse.centroids.npy   (lists, dim) float32, unit length
    coarse.lists.npy       (chunks,) int32: each chunk's list

An update keeps the centroids of the previous generation: a chunk whose embedding text is
unchanged (same `text_key`, hence the same vector) keeps its list, and only new chunks are
compared with the centroids. The centroids are trained again when the index has grown or
shrunk so much that their number is off by more than a factor of two (`_fits`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from search_engine.errors import IndexDamagedError, reading
from search_engine.index.arrays import load_array

# Indexes with fewer chunks are searched exactly (every allowed chunk's sign bits).
MIN_CHUNKS = 150_000
# Chunks a query takes from the nearest lists (at least `MIN_PROBES` lists), before the sign
# bits pick the few thousand to rescore: recall of the int8 top 10 against an exhaustive
# int8 scan is measured in docs/architecture.md ("Limits").
PROBE_CHUNKS = 24_000
MIN_PROBES = 8
# k-means: sample size per list and iterations. Sixteen rows per centroid and a few rounds
# are enough for a partition that only has to keep near vectors together. At 430k chunks,
# for the same `PROBE_CHUNKS`, sqrt(n) lists kept 89% of the exact top 10, 4 sqrt(n) lists
# 95% (8 sqrt(n): 96%, for twice the build time).
SAMPLE_PER_LIST = 16
ITERATIONS = 8
# Scratch of one batch of row-centroid products (bounds what a build adds to its peak).
_SCRATCH_BYTES = 32 << 20
_SEED = 20_240_601

_CENTROIDS, _LISTS = "coarse.centroids.npy", "coarse.lists.npy"


def list_count(n: int) -> int:
    """Lists for `n` chunks: ~4 sqrt(n), so a list holds ~sqrt(n) / 4 chunks."""
    return max(1, round(4 * math.sqrt(n)))


@dataclass(frozen=True, slots=True)
class CoarseIndex:
    """Centroids and each chunk's list; `order[bounds[l]:bounds[l + 1]]` are list l's chunk
    ids, ascending (derived at load, not stored)."""

    centroids: np.ndarray
    lists: np.ndarray
    order: np.ndarray
    bounds: np.ndarray

    @classmethod
    def of(cls, centroids: np.ndarray, lists: np.ndarray) -> CoarseIndex:
        lists = np.asarray(lists, dtype=np.int32)
        order = np.argsort(lists, kind="stable").astype(np.int32)
        bounds = np.zeros(len(centroids) + 1, dtype=np.int64)
        np.cumsum(np.bincount(lists, minlength=len(centroids)), out=bounds[1:])
        return cls(np.asarray(centroids, dtype=np.float32), lists, order, bounds)

    def probe(self, query: np.ndarray, allowed: np.ndarray | None, want: int) -> np.ndarray:
        """Chunk ids (ascending) of the lists nearest to `query`, taken nearest first until
        they hold `want` chunks that `allowed` (a boolean mask, None: all) lets through, and
        at least `MIN_PROBES` lists; only allowed ones are returned."""
        nearest = np.argsort(-(self.centroids @ np.asarray(query, dtype=np.float32)), kind="stable")
        if allowed is None:
            sizes = np.diff(self.bounds)
        else:
            sizes = np.bincount(self.lists[allowed], minlength=len(self.centroids))
        held = np.cumsum(sizes[nearest])
        count = max(MIN_PROBES, int(np.searchsorted(held, want)) + 1)
        parts = [self.order[self.bounds[lst] : self.bounds[lst + 1]] for lst in nearest[:count].tolist()]
        ids = np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.int32)
        return ids if allowed is None else ids[allowed[ids]]


def nearest_lists(codes: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Each row's nearest centroid by cosine (int32). A row's scale does not change which
    centroid is nearest, so the int8 codes are compared as they are."""
    return _nearest(codes, centroids)[0]


def _nearest(rows: np.ndarray, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's nearest centroid (int32) and its dot product with it, a batch at a time."""
    labels = np.empty(len(rows), dtype=np.int32)
    best = np.empty(len(rows), dtype=np.float32)
    t = np.ascontiguousarray(centroids.T, dtype=np.float32)
    batch = max(1, _SCRATCH_BYTES // (4 * max(len(centroids), 1)))
    for start in range(0, len(rows), batch):
        sims = np.asarray(rows[start : start + batch], dtype=np.float32) @ t
        labels[start : start + len(sims)] = np.argmax(sims, axis=1)
        best[start : start + len(sims)] = sims[np.arange(len(sims)), labels[start : start + len(sims)]]
    return labels, best


def train(codes: np.ndarray, count: int) -> np.ndarray:
    """`count` unit centroids by spherical k-means over a seeded sample of `codes` (so a
    rebuild of the same tree partitions it the same way)."""
    rng = np.random.default_rng(_SEED)
    n = len(codes)
    sample = np.sort(rng.choice(n, size=min(n, count * SAMPLE_PER_LIST), replace=False))
    x = _unit(np.asarray(codes[sample], dtype=np.float32))
    centroids = x[rng.choice(len(x), size=count, replace=False)]
    for _ in range(ITERATIONS):
        labels, best = _nearest(x, centroids)
        order = np.argsort(labels, kind="stable")
        used, starts = np.unique(labels[order], return_index=True)
        sums = np.zeros_like(centroids)
        sums[used] = np.add.reduceat(x[order], starts, axis=0)
        # An empty list (a centroid drawn twice from duplicated code) restarts at the rows its
        # centroids serve worst.
        empty = np.setdiff1d(np.arange(count), used)
        if len(empty):
            worst = np.argsort(best, kind="stable")[: len(empty)]
            sums[empty[: len(worst)]] = x[worst]
        centroids = _unit(sums)
    return centroids


def build(codes: np.ndarray, keys: np.ndarray, previous: tuple[CoarseIndex, np.ndarray] | None) -> CoarseIndex | None:
    """The coarse index of a generation's `codes` (int8, one row per chunk) whose embedding
    texts have `keys` (`chunk_table.text_key`), or None below `MIN_CHUNKS`. `previous` is the
    last generation's index and keys: its centroids and lists are kept where they still fit."""
    n = len(codes)
    if n < MIN_CHUNKS:
        return None
    if previous is None or not _fits(len(previous[0].centroids), n):
        centroids = train(codes, list_count(n))
        return CoarseIndex.of(centroids, nearest_lists(codes, centroids))
    old, old_keys = previous
    lists = np.full(n, -1, dtype=np.int32)
    by_key = np.argsort(old_keys, kind="stable")
    sorted_keys = np.asarray(old_keys)[by_key]
    at = np.minimum(np.searchsorted(sorted_keys, keys), max(len(sorted_keys) - 1, 0))
    found = sorted_keys[at] == keys if len(sorted_keys) else np.zeros(n, dtype=bool)
    lists[found] = old.lists[by_key[at[found]]]
    fresh = np.flatnonzero(~found)
    if len(fresh):
        lists[fresh] = nearest_lists(np.asarray(codes[fresh]), old.centroids)
    return CoarseIndex.of(old.centroids, lists)


def _fits(lists: int, n: int) -> bool:
    ideal = list_count(n)
    return ideal / 2 <= lists <= ideal * 2


def save(directory: Path, coarse: CoarseIndex | None) -> None:
    """Write `coarse` into a generation directory (nothing when there is none)."""
    if coarse is not None:
        np.save(directory / _CENTROIDS, coarse.centroids)
        np.save(directory / _LISTS, coarse.lists)


def load(directory: Path, n: int, dim: int) -> CoarseIndex | None:
    """The coarse index of a generation, None if it has none (a small index).
    IndexDamagedError if it cannot be read or its parts disagree with the generation's."""
    if not (directory / _LISTS).exists():
        return None
    with reading("the coarse index", directory):
        centroids = load_array(directory / _CENTROIDS, mmap=False)
        lists = load_array(directory / _LISTS, mmap=False)
    if (centroids.ndim != 2 or centroids.shape[1] != dim or lists.shape != (n,) or lists.dtype != np.int32
            or (n and not 0 <= int(lists.min()) <= int(lists.max()) < len(centroids))):  # fmt: skip
        raise IndexDamagedError(
            f"the coarse index in {directory} does not match its vectors; it will be rebuilt", directory
        )
    return CoarseIndex.of(centroids, lists)


def _unit(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.where(norms > 0, norms, 1.0)).astype(np.float32)
