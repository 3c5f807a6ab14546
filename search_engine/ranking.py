"""Semantic and hybrid search over one index generation: from a `SearchRequest` to matches.

The engine keeps one `Ranker` per root and index generation, so everything derived from the
index (the `Corpus`: per-file structures, symbol table, path vocabulary) is built once and
every query only pays for scoring. Path filters (sub-path, include and exclude globs) become a
mask over chunks *before* ranking: top-k is taken among allowed chunks, never cut afterwards,
so a filter never leaves a page short. Globs are resolved by the same ripgrep file selection
that regex search uses (`search_engine.files.discover`), so `--glob '*.py'` means the same
thing in every mode; the result is cached per filter for the life of the generation.

Scoring runs with numpy's BLAS limited to one thread. A query's products are matrix-vector
(chunks x dims): too small to gain from threads, and waking OpenBLAS's thread pool for each
one cost 5-15 ms per query on a busy two-core machine against ~1.5 ms single-threaded.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Protocol

import numpy as np
from cachetools import LRUCache
from threadpoolctl import ThreadpoolController

from search_engine.chunk_table import ChunkTable
from search_engine.chunks import Chunk
from search_engine.config import EngineConfig
from search_engine.corpus import Corpus
from search_engine.errors import reading
from search_engine.files import discover
from search_engine.hits import Hit
from search_engine.hybrid import hybrid_search
from search_engine.lexical import LexicalIndex
from search_engine.models import Match, MatchType, SearchMode, SearchRequest, SearchResult
from search_engine.paths import SearchLocation
from search_engine.roots import combined_generation, in_root
from search_engine.semantic import semantic_search
from search_engine.tokenize import validate_query
from search_engine.vectors import VectorIndex

# Distinct filter combinations remembered per generation (each is one boolean per chunk).
_FILTER_CACHE_SIZE = 64
_THREADPOOLS = ThreadpoolController()


class IndexView(Protocol):
    """What ranking reads from a built index (see `search_engine.index`). `chunks`, the rows
    of `vectors` and the lexical index's documents are aligned."""

    @property
    def chunks(self) -> ChunkTable: ...

    @property
    def vectors(self) -> VectorIndex: ...

    @property
    def lexical(self) -> LexicalIndex: ...

    @property
    def generation(self) -> int: ...

    def embed_query(self, text: str) -> np.ndarray: ...


class Ranker:
    """Runs semantic and hybrid requests against one index generation."""

    def __init__(self, index: IndexView, config: EngineConfig | None = None) -> None:
        self._index = index
        self._config = config or EngineConfig()
        # The columns are joined here: a generation whose parts disagree is damage (a rebuild).
        with reading("the index", index.chunks.directory):
            self.corpus = Corpus.build(index.chunks, index.vectors, index.lexical)
        self._masks: LRUCache[tuple[str, str | None, tuple[str, ...], tuple[str, ...]], np.ndarray] = LRUCache(
            _FILTER_CACHE_SIZE
        )

    @property
    def generation(self) -> int:
        return self._index.generation

    def search(self, request: SearchRequest) -> SearchResult:
        """Rank the index's chunks for a semantic or hybrid `request` (of this index's root).

        `threshold` drops matches scoring below it: for semantic search the score is the
        cosine similarity (blended with the file's, scaled by the path priors, raised for
        a coherent file's best chunk and kept in [-1, 1], see `search_engine.semantic`);
        for hybrid it is the fused score relative to the best match (1.0), since fused
        reciprocal-rank sums have no absolute scale. Raises InvalidQueryError for
        an empty or stopword-only query (before any work)."""
        started = time.perf_counter()
        return ranked_result(request, [(None, self, self.rank(request))], started)

    def rank(self, request: SearchRequest) -> list[Hit]:
        """The request's best chunks, before they become matches, scored so that the lists of
        several roots merge by score: a semantic score (`threshold` applied), or the fused
        hybrid score as it is, which `ranked_result` scales to the best of all and thresholds."""
        terms = validate_query(request.query)
        allowed = self.allowed(request)
        query_vector = self._index.embed_query(request.query)
        with _THREADPOOLS.limit(limits=1, user_api="blas"):
            if request.mode is SearchMode.SEMANTIC:
                corpus = self.corpus
                return semantic_search(
                    corpus.vectors,
                    query_vector,
                    allowed,
                    request.top_k,
                    request.threshold,
                    corpus.file_of,
                    file_similarity=corpus.file_vectors @ query_vector,
                    priors=corpus.priors_for(request.query),
                )
            if request.mode is SearchMode.HYBRID:
                return hybrid_search(self.corpus, request.query, terms, query_vector, allowed, request.top_k)
        raise ValueError(f"Ranker handles semantic and hybrid searches, not {request.mode.value}")

    def matches(self, hits: Sequence[Hit], kind: MatchType, root: str | None) -> list[Match]:
        """`hits` as matches; `root` (a search of several roots) makes their paths absolute."""
        chunks = self.corpus.chunks.take([hit.chunk for hit in hits])
        matches = [_match(hit, chunk, kind) for hit, chunk in zip(hits, chunks, strict=True)]
        return matches if root is None else in_root(root, matches)

    def allowed(self, request: SearchRequest) -> np.ndarray | None:
        """Boolean mask of the chunks the request's sub-path and globs let through; None when
        they let every chunk through (ranking then builds nothing as long as the index)."""
        if request.path is None and not request.include and not request.exclude:
            return None
        key = (request.root, request.path, request.include, request.exclude)
        mask = self._masks.get(key)
        if mask is None:
            mask = self._file_mask(request)[self.corpus.file_of]
            self._masks[key] = mask
        return mask

    def _file_mask(self, request: SearchRequest) -> np.ndarray:
        files = self.corpus.files
        if not request.include and not request.exclude:
            sub = request.path.strip("/") if request.path else ""
            return np.fromiter((p == sub or p.startswith(sub + "/") for p in files), dtype=bool, count=len(files))
        location = SearchLocation(Path(request.root), request.path)
        selected = {f.path for f in discover(location, request.include, request.exclude, self._config)}
        return np.fromiter((p in selected for p in files), dtype=bool, count=len(files))


def _match(hit: Hit, c: Chunk, kind: MatchType) -> Match:
    """The match of ranked chunk `c` (`hit`'s)."""
    score, ranks = round(hit.score, 6), dict(hit.ranks) if kind is MatchType.HYBRID else None
    # Positional up to `score`, in `Match`'s field order, as `regex.py` builds its matches.
    return Match(
        c.path, c.line_start, c.line_end, c.byte_start, c.byte_end, c.content, kind, c.language, score, ranks=ranks
    )


#: One root's ranked list: its label (None when it is the only root searched), its ranker, its hits.
RootHits = tuple[str | None, Ranker, list[Hit]]


def ranked_result(request: SearchRequest, lists: Sequence[RootHits], started: float) -> SearchResult:
    """The matches of a semantic or hybrid `request` from each searched root's ranked list:
    merged by score (equal scores: the earlier root, then each list's order), cut to `top_k`;
    a hybrid score is then made relative to the best of them all (1.0) and `threshold`
    applied to that. The index generation is the roots' generations combined."""
    merged = heapq.merge(
        *([(-hit.score, n, r, hit) for r, hit in enumerate(hits)] for n, (_, _, hits) in enumerate(lists))
    )
    chosen = [(n, hit) for _, n, _, hit in itertools.islice(merged, request.top_k)]
    kind = MatchType.SEMANTIC if request.mode is SearchMode.SEMANTIC else MatchType.HYBRID
    if kind is MatchType.HYBRID:
        best = chosen[0][1].score if chosen else 1.0
        chosen = [(n, replace(hit, score=hit.score / best)) for n, hit in chosen]
        if request.threshold is not None:
            chosen = [(n, hit) for n, hit in chosen if hit.score >= request.threshold]
    shown: list[Match | None] = [None] * len(chosen)
    for n, (label, ranker, _) in enumerate(lists):
        places = [i for i, (m, _) in enumerate(chosen) if m == n]
        for i, match in zip(places, ranker.matches([chosen[i][1] for i in places], kind, label), strict=True):
            shown[i] = match
    matches = [m for m in shown if m is not None]
    return SearchResult(
        matches=matches,
        total_count=len(matches),
        index_generation=combined_generation([ranker.generation for _, ranker, _ in lists]),
        search_time_ms=(time.perf_counter() - started) * 1000,
    )
