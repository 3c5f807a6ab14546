"""Semantic-only ranking: chunks ordered by cosine similarity to the query's embedding.

This is the mode for "find code that means this" when exact words would mislead, and it is
kept pure on purpose: no lexical, symbol or path signal, so its score is a plain cosine in
[-1, 1] and `threshold` means "at least this similar". The cosine is the int8 one of the
index's quantized vectors; on a large index only the chunks nearest by sign bits are scored
(`search_engine.vectors`), so a query costs a pass over 32 bytes a chunk, not a float product.
"""

from __future__ import annotations

import numpy as np

from search_engine.hits import Hit
from search_engine.vectors import VectorIndex


def semantic_search(
    vectors: VectorIndex,
    query_vector: np.ndarray,
    allowed: np.ndarray,
    top_k: int,
    threshold: float | None,
) -> list[Hit]:
    """The `top_k` chunks most similar to the query among those `allowed` (boolean mask; path
    filters apply before top-k), dropping any below `threshold`. Ties go to the earlier chunk,
    so results are deterministic for a given index."""
    ids, sims = vectors.top(query_vector, np.flatnonzero(allowed), top_k)
    if threshold is not None:
        keep = sims >= threshold
        ids, sims = ids[keep], sims[keep]
    return [Hit(int(i), float(s), {"semantic": r}) for r, (i, s) in enumerate(zip(ids.tolist(), sims.tolist()), 1)]
