"""Semantic and hybrid search over one index generation: from a `SearchRequest` to matches.

The engine keeps one `Ranker` per root and index generation, so everything derived from the
index (the `Corpus`: per-file structures, symbol table, path vocabulary) is built once and
every query only pays for scoring. Path filters (sub-path, include and exclude globs) become a
mask over chunks *before* ranking: top-k is taken among allowed chunks, never cut afterwards,
so a filter never leaves a page short. Globs are resolved by the same ripgrep file selection
that regex search uses (`search_engine.files.discovery.discover`), so `--glob '*.py'` means the same
thing in every mode; the result is cached per filter for the life of the generation.

Scoring runs with numpy's BLAS limited to one thread. A query's products are matrix-vector
(chunks x dims): too small to gain from threads, and waking OpenBLAS's thread pool for each
one cost 5-15 ms per query on a busy two-core machine against ~1.5 ms single-threaded.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import numpy as np
from cachetools import LRUCache
from threadpoolctl import ThreadpoolController

from search_engine.chunking.chunk import Chunk
from search_engine.config import EngineConfig
from search_engine.embedding.embedder import relevance_floor
from search_engine.errors import reading
from search_engine.files.discovery import discover
from search_engine.files.paths import SearchLocation
from search_engine.index.chunk_table import ChunkTable, take
from search_engine.index.vectors import VectorIndex
from search_engine.live.read_your_writes import Settled
from search_engine.models import Match, MatchType, SearchMode, SearchRequest, SearchResult
from search_engine.ranking.code_tokens import validate_query
from search_engine.ranking.corpus import Corpus, LivePart
from search_engine.ranking.hits import Hit
from search_engine.ranking.hybrid import hybrid_search
from search_engine.ranking.lexical import LexicalIndex
from search_engine.ranking.semantic import semantic_search
from search_engine.roots import combined_freshness, combined_generation, in_root


def low_relevance(best_cosine: float | None, floor: float | None, hits: list[Hit]) -> str | None:
    """The warning for a search where nothing is close to the query, or None: its best cosine is
    under the model's relevance floor (None: a model it was not calibrated for), and no result
    defines a name the query names (a bare identifier embeds poorly, but a hybrid search that
    found its definition found what was asked; none of 450 off-topic questions got such a
    result on the benchmark repositories)."""
    if best_cosine is None or floor is None or best_cosine >= floor or any("symbol" in h.ranks for h in hits):
        return None
    return (
        f"low relevance: no code is close to the query (best cosine similarity {best_cosine:.2f}, under "
        f"{floor:.2f}, where questions this code does not answer land): the results may not be about it. "
        "Rephrase with the code's own words, or look for a name with regex_search"
    )


# Distinct filter combinations remembered per generation (each is one boolean per chunk).
_FILTER_CACHE_SIZE = 64
_THREADPOOLS = ThreadpoolController()


class IndexView(Protocol):
    """What ranking reads from a built index (see `search_engine.index.manager`). `chunks`, the rows
    of `vectors` and the lexical index's documents are aligned."""

    @property
    def chunks(self) -> ChunkTable: ...

    @property
    def vectors(self) -> VectorIndex: ...

    @property
    def lexical(self) -> LexicalIndex: ...

    @property
    def generation(self) -> int: ...

    @property
    def model_id(self) -> str: ...

    def embed_query(self, text: str) -> np.ndarray: ...


class Ranker:
    """Runs semantic and hybrid requests against one index generation."""

    def __init__(
        self, index: IndexView, config: EngineConfig | None = None, joined: tuple[Corpus, np.ndarray] | None = None
    ) -> None:
        """`joined`: the generation's corpus joined to the live files' and the chunks it hides
        (see `beside`); None ranks the generation alone."""
        self._index = index
        self._config = config or EngineConfig()
        self._hidden: np.ndarray | None = None
        self._paths: frozenset[str] | None = None
        self._sorted: list[str] | None = None
        self._file_order = np.zeros(0, dtype=np.int64)
        if joined is not None:
            self.corpus, self._hidden = joined
        else:
            # The columns are joined here: a generation whose parts disagree is damage (a rebuild).
            with reading("the index", index.chunks.directory):
                self.corpus = Corpus.build(index.chunks, index.vectors, index.lexical)
        self._masks: LRUCache[tuple[str, str | None, tuple[str, ...], tuple[str, ...]], np.ndarray] = LRUCache(
            _FILTER_CACHE_SIZE
        )

    @property
    def generation(self) -> int:
        return self._index.generation

    def prepare(self) -> None:
        """Make now what a search with changed files asks for (`paths`, `sorted_files`): a fold
        calls this on its thread, so the first search after it does not pay for them (~10 ms at
        8x sympy)."""
        self.paths, self.sorted_files  # noqa: B018  (made on first use)

    @property
    def paths(self) -> frozenset[str]:
        """The generation's files (made on first use: only a live layer asks)."""
        if self._paths is None:
            self._paths = frozenset(self.corpus.files)
        return self._paths

    @property
    def sorted_files(self) -> list[str]:
        """The corpus's files in Python's string order (`_file_order[i]` is the file id of
        the i-th), made on first use: only a search with changed files asks."""
        if self._sorted is None:
            order = sorted(range(len(self.corpus.files)), key=self.corpus.files.__getitem__)
            self._file_order = np.asarray(order, dtype=np.int64)
            self._sorted = [self.corpus.files[i] for i in order]
        return self._sorted

    @property
    def lexical(self) -> LexicalIndex:
        return self._index.lexical

    @property
    def dim(self) -> int:
        return self._index.vectors.shape[1]

    def beside(self, live: LivePart, changed: frozenset[str]) -> Ranker:
        """A ranker of this generation joined to the `live` files (`search_engine.live.layer`),
        hiding this generation's chunks of the `changed` paths (a directory: everything under
        it)."""
        corpus = self.corpus.join(live)
        hidden_files = np.zeros(len(corpus.files), dtype=bool)
        hidden_files[: len(self.corpus.files)] = self.files_under(changed)  # the generation's come first
        return Ranker(self._index, self._config, (corpus, hidden_files[corpus.file_of]))

    def files_under(self, paths: Iterable[str]) -> np.ndarray:
        """A mask over this corpus's files: each of `paths` and every file beneath one (a
        directory; "" is the whole root). Two bisections a path over the files in string order,
        where a directory's files are one run: a pass over every file, per search, took 70-380
        ms of each search during a 1,000-file checkout at 8x sympy."""
        files, order = self.sorted_files, self._file_order
        out = np.zeros(len(files), dtype=bool)
        for path in paths:
            if not path:
                out[:] = True
                break
            at = bisect.bisect_left(files, path)
            if at < len(files) and files[at] == path:
                out[order[at]] = True
            # `path/...` sorts from `path/` to `path0`, exclusive ('0' follows '/').
            start = bisect.bisect_left(files, path + "/", at)
            out[order[start : bisect.bisect_left(files, path + "0", start)]] = True
        return out

    @property
    def model_id(self) -> str:
        return self._index.model_id

    def search(self, request: SearchRequest, settled: Settled | None = None) -> SearchResult:
        """Rank the index's chunks for a semantic or hybrid `request` (of this index's root),
        leaving out the files `settled` says changed and are not in this generation yet (its
        `pending` paths).

        `threshold` drops matches scoring below it: for semantic search the score is the
        cosine similarity (blended with the file's, scaled by the path priors, raised for
        a coherent file's best chunk and kept in [-1, 1], see `search_engine.ranking.semantic`);
        for hybrid it is the fused score relative to the best match (1.0), since fused
        reciprocal-rank sums have no absolute scale. Raises InvalidQueryError for
        an empty or stopword-only query (before any work)."""
        started = time.perf_counter()
        return ranked_result(request, [self.rank(request, settled)], started)

    def rank(self, request: SearchRequest, settled: Settled | None = None, label: str | None = None) -> Ranked:
        """The request's best chunks before they become matches (`search` without the last
        step), scored so that the lists of several roots merge by score: a semantic score
        (`threshold` applied), or the fused hybrid score as it is, which `ranked_result` makes
        relative to the best of all and thresholds. `label`: the root, in a search of several."""
        rules = self._config.ranking
        terms = validate_query(request.query, rules.abbreviations)
        allowed = self.allowed(request)
        if self._hidden is not None:
            allowed = ~self._hidden if allowed is None else allowed & ~self._hidden
        if settled is not None and settled.pending:
            allowed = self._leave_out(allowed, settled)
        query_vector = self._index.embed_query(request.query)
        with _THREADPOOLS.limit(limits=1, user_api="blas"):
            if request.mode is SearchMode.SEMANTIC:
                corpus = self.corpus
                hits, best_cosine = semantic_search(
                    corpus.vectors,
                    query_vector,
                    allowed,
                    request.top_k,
                    request.threshold,
                    corpus.file_of,
                    file_similarity=corpus.file_vectors @ query_vector,
                    priors=corpus.priors_for(request.query, rules),
                    rules=rules,
                )
            elif request.mode is SearchMode.HYBRID:
                hits, best_cosine = hybrid_search(
                    self.corpus, request.query, terms, query_vector, allowed, request.top_k, rules
                )
            else:
                raise ValueError(f"Ranker handles semantic and hybrid searches, not {request.mode.value}")
        return Ranked(self, hits, best_cosine, settled, label)

    def matches(self, hits: Sequence[Hit], kind: MatchType, label: str | None) -> list[Match]:
        """`hits` as matches; `label` (a search of several roots) makes their paths absolute."""
        chunks = take(self.corpus.chunks, [hit.chunk for hit in hits])
        matches = [_match(hit, chunk, kind) for hit, chunk in zip(hits, chunks, strict=True)]
        return matches if label is None else in_root(label, matches)

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

    def _leave_out(self, allowed: np.ndarray | None, settled: Settled) -> np.ndarray:
        """`allowed` without the chunks of the files `settled` leaves out (its `pending` paths:
        changed, not folded in): their text here is no longer the file's, so none of it may be
        answered."""
        chunks: np.ndarray = ~self.files_under(settled.pending)[self.corpus.file_of]
        return chunks if allowed is None else allowed & chunks

    def _file_mask(self, request: SearchRequest) -> np.ndarray:
        files = self.corpus.files
        if not request.include and not request.exclude:
            sub = request.path.strip("/") if request.path else ""
            return np.fromiter((p == sub or p.startswith(sub + "/") for p in files), dtype=bool, count=len(files))
        location = SearchLocation(Path(request.root), request.path)
        selected = {f.path for f in discover(location, request.include, request.exclude, self._config).files}
        return np.fromiter((p in selected for p in files), dtype=bool, count=len(files))


def _match(hit: Hit, c: Chunk, kind: MatchType) -> Match:
    """The match of ranked chunk `c` (`hit`'s)."""
    score, ranks = round(hit.score, 6), dict(hit.ranks) if kind is MatchType.HYBRID else None
    # Positional up to `score`, in `Match`'s field order, as `regex/search.py` builds its matches.
    return Match(
        c.path, c.line_start, c.line_end, c.byte_start, c.byte_end, c.content, kind, c.language, score, ranks=ranks
    )


@dataclass(frozen=True, slots=True)
class Ranked:
    """One root's ranked list before it becomes matches (`Ranker.rank`): its hits, the best
    cosine of the query with a chunk it could rank, what the files' state was (`settled`) and
    its root's `label` (None when it is the only root searched)."""

    ranker: Ranker
    hits: list[Hit]
    best_cosine: float | None
    settled: Settled | None
    label: str | None


def ranked_result(request: SearchRequest, lists: Sequence[Ranked], started: float) -> SearchResult:
    """The matches of a semantic or hybrid `request` from each searched root's ranked list:
    merged by score (equal scores: the earlier root, then each list's order) and cut to
    `top_k`; a hybrid score is then made relative to the best of them all (1.0) and `threshold`
    applied to that. Generation, freshness and relevance are the roots' combined: the best
    similarity is the best of any root, and low relevance is said only when it is low for all."""
    merged = heapq.merge(
        *([(-hit.score, n, r, hit) for r, hit in enumerate(part.hits)] for n, part in enumerate(lists))
    )
    chosen = [(n, hit) for _, n, _, hit in itertools.islice(merged, request.top_k)]
    kind = MatchType.SEMANTIC if request.mode is SearchMode.SEMANTIC else MatchType.HYBRID
    if kind is MatchType.HYBRID:
        best = chosen[0][1].score if chosen else 1.0
        chosen = [(n, replace(hit, score=hit.score / best)) for n, hit in chosen]
        if request.threshold is not None:
            chosen = [(n, hit) for n, hit in chosen if hit.score >= request.threshold]
    shown: list[Match | None] = [None] * len(chosen)
    for n, part in enumerate(lists):
        places = [i for i, (m, _) in enumerate(chosen) if m == n]
        for i, match in zip(places, part.ranker.matches([chosen[i][1] for i in places], kind, part.label), strict=True):
            shown[i] = match
    matches = [m for m in shown if m is not None]
    cosines = [part.best_cosine for part in lists if part.best_cosine is not None]
    best_cosine = max(cosines) if cosines else None
    low = low_relevance(best_cosine, relevance_floor(lists[0].ranker.model_id), [hit for _, hit in chosen])
    return SearchResult(
        matches=matches,
        total_count=len(matches),
        index_generation=combined_generation([part.ranker.generation for part in lists]),
        search_time_ms=(time.perf_counter() - started) * 1000,
        freshness=combined_freshness(
            [(part.label, part.settled.report()) for part in lists if part.settled is not None]
        ),
        warnings=[low] if low else [],
        best_similarity=None if best_cosine is None else round(best_cosine, 4),
        low_relevance=low is not None,
    )
