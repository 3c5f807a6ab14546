"""Semantic-only ranking: chunks ordered by how close their embedding is to the query's.

This is the mode for "find code that means this" when exact words would mislead, so it uses
no lexical, symbol or file-name signal: only embeddings. Two things about a chunk's place
still count, because they are not words either and without them the mode was not worth using
on real repositories (tests, docs and samples share the implementation's vocabulary and
crowded it out):

- what the file as a whole is about: the cosine with the file's mean vector is added with
  `FILE_WEIGHT`, so a function in a module about the query beats a stray look-alike elsewhere;
- the path priors of hybrid search (`search_engine.ranking.priors`): tests, docs, examples, generated
  and vendored files are scaled down unless the query asks for them.

Results are then spread over files as in hybrid search (`search_engine.ranking.hits.diversify`): a
file's second chunk keeps half its score, its third a quarter. The score is that prior-weighted,
diversified similarity (a cosine blend, in [-1, 1]), and `threshold` applies to it. A bonus
for a file whose chunks match as a group ("coherence") was tried and removed: switched off
alone it helped 7 dev repositories and hurt 7, fmtlib by 0.040 (issue 39's standard).

The chunk cosine is the int8 one of the index's quantized vectors (`search_engine.index.vectors`).
The blend is computed over every chunk the index rescores anyway (all allowed chunks of an
index up to `index.vectors.RESCORE`, else the `RESCORE` nearest by sign bits, among the chunks of
the nearest lists in an index large enough for a coarse quantizer), not only over the
best few by cosine: a chunk of middling cosine in a file about the query must still be able to
rise, as it did when every chunk was scored. So a query costs a pass over 32 bytes a chunk and
a few thousand int8 rows, not a float product over the whole index.
"""

from __future__ import annotations

import numpy as np

from search_engine.index.vectors import Vectors
from search_engine.ranking.hits import Hit, diversify, saturated
from search_engine.ranking.rules import ALL_ON, RankingRules

# Weight of the file's similarity next to the chunk's own (which has weight 1 - FILE_WEIGHT).
FILE_WEIGHT = 0.3
# The selection pool: the chunks (at least; 4 x top_k if more) the per-file selection chooses
# among, the best by their score once decayed for the file's chunks before them (`hits.saturated`).
SELECTION_POOL = 100


def similarity(
    cosines: np.ndarray, files: np.ndarray, file_similarity: np.ndarray | None, priors: np.ndarray | None
) -> np.ndarray:
    """Chunks' similarity to the query as this mode ranks them (float64, aligned with
    `cosines` and `files`, their file ids): the cosine blended with the file's
    (`file_similarity`, per file) by `FILE_WEIGHT`, then scaled by the file's path prior
    (`priors`, per file; a factor scales a positive similarity down and a negative one further
    down). Hybrid search ranks its semantic list by it too."""
    sims = np.asarray(cosines, dtype=np.float64)
    if file_similarity is not None:
        sims = (1.0 - FILE_WEIGHT) * sims + FILE_WEIGHT * file_similarity[files]
    if priors is not None:
        factor = priors[files]
        sims = np.where(sims > 0, sims * factor, sims / factor)
    return sims


def semantic_search(
    vectors: Vectors,
    query_vector: np.ndarray,
    allowed: np.ndarray | None,
    top_k: int,
    threshold: float | None,
    file_of: np.ndarray,
    file_similarity: np.ndarray | None = None,
    priors: np.ndarray | None = None,
    rules: RankingRules = ALL_ON,
) -> tuple[list[Hit], float | None]:
    """The `top_k` chunks most similar to the query among those `allowed` (boolean mask, None
    for every chunk; path filters apply before top-k), diversified across files, dropping any scoring below `threshold`
    (`file_of`: each chunk's file id); and the best cosine of the query with an allowed chunk
    (None when none is), the absolute relevance that the blended, scaled scores no longer show.
    `file_similarity` (each file's cosine with the query) and
    `priors` (each file's path factor in (0, 1]), when given, are per file: only the candidates'
    files are read, so a query costs no array as long as the index. Ties go to the earlier
    chunk, so results are deterministic for a given index. `rules`: which ranking rules are on
    (`search_engine.ranking.rules`)."""
    if top_k <= 0:
        return [], None
    n = max(SELECTION_POOL, 4 * top_k)
    # Every chunk the vector index rescores (it never returns fewer than `n` if it has them).
    ids, sims = vectors.nearest(query_vector, allowed, n).ranked()
    if len(ids) == 0:
        return [], None
    best_cosine = float(sims[0])
    files = file_of[ids]
    sims = similarity(
        sims, files, file_similarity if rules.file_similarity else None, priors if rules.semantic_priors else None
    )
    # The best n by the score the per-file selection will give them are enough to fill top_k
    # across files (by raw score, a few long files could fill all n); diversify over those.
    cut_by = saturated(files, sims) if rules.saturated_cut else sims
    top = np.argpartition(-cut_by, n - 1)[:n] if n < len(ids) else np.arange(len(ids))
    top = top[np.lexsort((ids[top], -sims[top]))]
    scores = np.zeros(len(file_of), dtype=np.float64)
    scores[ids[top]] = sims[top]
    held = diversify(file_of, ids[top], scores, top_k, rules.diversify)
    if threshold is not None:
        held = [(s, i) for s, i in held if s >= threshold]
    return [Hit(i, s, {"semantic": r}) for r, (s, i) in enumerate(held, 1)], best_cosine
