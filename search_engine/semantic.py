"""Semantic-only ranking: chunks ordered by cosine similarity to the query's embedding.

This is the mode for "find code that means this" when exact words would mislead, and it is
kept pure on purpose: no lexical, symbol or path signal, so its score is a plain cosine in
[-1, 1] and `threshold` means "at least this similar". Vectors are L2-normalized by the index,
so the cosine is one matrix-vector product (a few milliseconds for 100k chunks).
"""

from __future__ import annotations

import numpy as np

from search_engine.hits import Hit


def semantic_search(
    vectors: np.ndarray,
    query_vector: np.ndarray,
    allowed: np.ndarray,
    top_k: int,
    threshold: float | None,
) -> list[Hit]:
    """The `top_k` chunks most similar to the query among those `allowed` (boolean mask; path
    filters apply before top-k), dropping any below `threshold`. Ties go to the earlier chunk,
    so results are deterministic for a given index."""
    ids = np.flatnonzero(allowed)
    if len(ids) == 0:
        return []
    sims = vectors[ids] @ query_vector if len(ids) < len(allowed) else vectors @ query_vector
    if threshold is not None:
        keep = sims >= threshold
        ids, sims = ids[keep], sims[keep]
    k = min(top_k, len(ids))
    if k == 0:
        return []
    top = np.argpartition(-sims, k - 1)[:k] if k < len(ids) else np.arange(len(ids))
    top = top[np.lexsort((ids[top], -sims[top]))]
    return [Hit(int(ids[j]), float(sims[j]), {"semantic": r}) for r, j in enumerate(top.tolist(), 1)]
