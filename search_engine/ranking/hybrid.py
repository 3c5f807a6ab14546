"""Hybrid ranking: fuse what the words, the meaning and the names of a query say.

Signals, each turned into reciprocal-rank contributions 1/(k + rank) (k = 60, the usual RRF
constant) so that scores of different scales can be added:

- per chunk: BM25 (`lexical`) and the similarity of embeddings (`semantic`), weighted by
  `ALPHA` (balanced, for identifiers and questions alike). The semantic list is
  ranked as semantic mode ranks chunks (`search_engine.ranking.semantic.similarity`: the cosine
  blended with the file's, scaled by the path priors), so tests, docs and stray look-alikes
  do not take the list's places from the implementation;
- `symbol`: chunks that *define* an identifier the query names (see `search_engine.ranking.symbols`),
  added on top, strongly for a bare identifier;
- per file, credited to the file's best chunk: BM25 over the whole file, the cosine with the
  file's mean vector, whether the query names the file (`path`: `tokenizer.py` for
  `Tokenizer` even when the class is imported from elsewhere; `web_urldispatcer`, `hlpers.py`
  or `client/sesion` for the file they nearly spell, see `search_engine.ranking.corpus.FileNames`;
  otherwise, more lightly, whether the query's words are the words of the file's name or
  folder: `show_exceptions.rb` for "exception rendering", see `search_engine.ranking.file_words`),
  and how many of its chunks score well ("coherence": above the median candidate, since RRF
  scores are flat and counting every candidate would just favour long files). Results are
  judged by whether the right file comes first, and a module that matches a question as a
  whole usually beats a stray function elsewhere that matches it best in isolation. Coherence
  weighs little (`COHERENCE_WEIGHT`): at the weight it first had, it helped 6 dev repositories
  and hurt 6 (issue 39's standard).

Every result's `ranks` says what put it there: its rank in each chunk list it is in
(`lexical`, `semantic`, `symbol`) and, for the chunk a file's score was credited to, the
file's rank in each file-level signal that scored it (`file_lexical`, `file_semantic`,
`path`, `coherence`). Each candidate got its score from at least one of these.

Then path priors scale down tests, shims, examples, prose, config, data and generated files
(`search_engine.ranking.priors`), and a greedy selection halves the score of each further chunk from an
already chosen file (`search_engine.ranking.hits.diversify`), so the first results cover several files
instead of ten slices of one.

The weights were set on the retrieval benchmark (benchmarks/retrieval.py; numbers in
docs/benchmarks.md), preferring round values and changes that help every category over ones
that fit single queries.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from search_engine.index.vectors import Nearest
from search_engine.ranking.corpus import Corpus
from search_engine.ranking.hits import Hit, coherence, diversify
from search_engine.ranking.rules import ALL_ON, RankingRules
from search_engine.ranking.semantic import similarity
from search_engine.ranking.symbols import NORMALIZED, query_identifiers

RRF_K = 60
# Candidates taken from each ranked list (chunks and files) before fusing; more only adds noise
# at the bottom. A bigger index keeping a share of itself (3% of the chunks, 10% of the files,
# up to 1,000) helped four dev repositories and hurt five (issue 39's standard), so the count
# is fixed, whatever the index's size.
CANDIDATES = 100
# Weight of the semantic list against the lexical one (1 - ALPHA), for a bare identifier as for
# a sentence: leaning lexical (0.3) for identifiers helped no dev repository and cost fmtlib 0.018.
ALPHA = 0.5
# Symbol-definition boost, in units of the best fused score so far.
SYMBOL_WEIGHT_WHOLE = 3.0
SYMBOL_WEIGHT_EMBEDDED = 1.5
# File-level signals, in RRF units (file lexical/semantic) or units of the best score (a file
# the query names, coherence). A query that is unmistakably a path (`hlpers.py`,
# `client/sesion`) asks for that file as strongly as a bare identifier asks for its definition;
# an identifier that also names a file (`Tokenizer`) leaves the lead to its definition.
FILE_LEXICAL_WEIGHT = 1.0
FILE_SEMANTIC_WEIGHT = 1.0
FILE_NAMED_WEIGHT = 1.0
PATH_WEIGHT_EXPLICIT = SYMBOL_WEIGHT_WHOLE
# A file whose stem or folder shares the query's words (`search_engine.ranking.file_words`), when no
# file is named outright: half a named file's weight (0.3 gained less on the multi-language
# set, 1.0 cost the Python set).
PATH_WORDS_WEIGHT = 0.5
# A file whose candidates match as a group (`search_engine.ranking.hits.coherence`), in units
# of the best score. Judged by issue 39's standard at 0.05-0.2: 0.05 to 0.1 pass (at 0.075 six
# dev repositories helped, libuv hurt by 0.008), 0.15 and 0.2 cost sinatra 0.023; 0.075 sits
# inside the passing band rather than at its edge.
COHERENCE_WEIGHT = 0.075


def reciprocal_ranks(values: np.ndarray, candidates: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The top `n` of `candidates` by `values` (aligned with them; descending, ties to the
    lower id, positive values only) and their RRF contributions 1/(RRF_K + rank)."""
    keep = values > 0
    candidates, values = candidates[keep], values[keep]
    if len(candidates) > n:
        # Everything scoring at least the n-th best value, ties at the cut included.
        near = np.flatnonzero(values >= np.partition(values, len(values) - n)[len(values) - n])
        candidates, values = candidates[near], values[near]
    top = np.lexsort((candidates, -values))[:n]
    return candidates[top], 1.0 / (RRF_K + np.arange(1, len(top) + 1))


def hybrid_search(
    corpus: Corpus,
    query: str,
    terms: list[str],
    query_vector: np.ndarray,
    allowed: np.ndarray | None,
    top_k: int,
    rules: RankingRules = ALL_ON,
) -> tuple[list[Hit], float | None]:
    """The `top_k` best chunks for a query among those `allowed` (a boolean mask over the
    corpus, None for every chunk: path filters are applied before ranking, never to its
    output), and the best cosine of the query with an allowed chunk (None when none is): fused
    scores are relative to the best (1.0), so only this says whether anything is close.

    Only candidates are scored: the chunks some query term occurs in, the rescored nearest
    vectors, the defining chunks and the chunks of the scored files. `fused` is indexed by
    chunk id but only ever read at `candidates`, so a query's cost follows those, not the
    size of the index. `rules`: which ranking rules are on (`search_engine.ranking.rules`)."""
    if allowed is not None and not allowed.any():
        return [], None
    identifiers = query_identifiers(query)
    n_cand = max(CANDIDATES, 2 * top_k)
    fused = np.zeros(len(corpus.chunks))  # zero pages are only materialized where written
    ranks = _Ranks()
    priors = corpus.priors_for(query, rules)
    file_similarity = corpus.file_vectors @ query_vector

    semantic = corpus.vectors.nearest(query_vector, allowed, n_cand)
    best_cosine = float(semantic.cosines.max()) if len(semantic.cosines) else None
    lexical_ids, lexical_scores = corpus.lexical.matching(terms, allowed)
    # Similarities are shifted to be positive so `reciprocal_ranks` keeps every candidate.
    blend = rules.hybrid_semantic_blend
    sims = similarity(
        semantic.cosines, corpus.file_of[semantic.ids], file_similarity if blend else None, priors if blend else None
    )
    listed = []
    for name, ids, values, weight in (
        ("lexical", lexical_ids, lexical_scores, 1.0 - ALPHA),
        ("semantic", semantic.ids, sims - sims.min(initial=0.0) + 1.0, ALPHA),
    ):
        order, contrib = reciprocal_ranks(values, ids, n_cand)
        fused[order] += weight * contrib
        listed.append(order)
        ranks.chunk_lists.append((name, order))
    candidates = np.unique(np.concatenate(listed))
    unit = fused[candidates].max() if len(candidates) else 1.0 / (RRF_K + 1)

    matched = corpus.symbols.match(query, rules) if rules.symbol_definitions else {}
    symbol_hits = [(i, s) for i, s in matched.items() if allowed is None or allowed[i]]
    symbol_weight = SYMBOL_WEIGHT_WHOLE if identifiers.whole else SYMBOL_WEIGHT_EMBEDDED
    by_symbol = sorted(symbol_hits, key=lambda h: (-h[1], h[0]))
    for i, s in by_symbol:
        fused[i] += symbol_weight * s * unit
    ranks.chunk_lists.append(("symbol", np.fromiter((i for i, _ in by_symbol), dtype=np.int64, count=len(by_symbol))))
    candidates = np.union1d(
        candidates, np.fromiter((i for i, _ in symbol_hits), dtype=np.int64, count=len(symbol_hits))
    )

    credited = _add_file_signals(
        corpus, query, terms, file_similarity, allowed, candidates, fused, ranks, semantic, unit, rules
    )

    candidates = np.union1d(candidates, credited)
    # The path priors weigh candidates that share the query's words; a definition of the very
    # identifier the whole query is, found in one file only, is the answer wherever it lives
    # (a test helper, a function just written into a test file) and keeps its score.
    sole = _sole_definition(corpus, symbol_hits, fused) if identifiers.whole and rules.sole_definitions else {}
    fused[candidates] *= priors[corpus.file_of[candidates]]
    for i, score in sole.items():
        fused[i] = score
    return _select(corpus, candidates, fused, ranks, top_k, rules), best_cosine


def _sole_definition(corpus: Corpus, symbol_hits: list[tuple[int, float]], fused: np.ndarray) -> dict[int, float]:
    """The chunks defining the query's identifier, by name or its case and underscore variants
    (not a near miss), when they all lie in one file, each with its `fused` score so far."""
    named = [i for i, s in symbol_hits if s >= NORMALIZED]
    if not named or len({int(corpus.file_of[i]) for i in named}) != 1:
        return {}
    return {i: float(fused[i]) for i in named}


def _add_file_signals(
    corpus: Corpus,
    query: str,
    terms: list[str],
    file_similarity: np.ndarray,
    allowed: np.ndarray | None,
    candidates: np.ndarray,
    fused: np.ndarray,
    ranks: _Ranks,
    semantic: Nearest,
    unit: float,
    rules: RankingRules,
) -> np.ndarray:
    """Score files as wholes and credit each file's score, and its ranks, to its best allowed
    chunk (`candidates`: the chunks scored so far, ascending; `file_similarity`: each file's
    cosine with the query); returns the credited chunks."""
    files_allowed = corpus.files_allowed(allowed)
    file_score = np.zeros(len(corpus.files))

    def add(name: str, files: np.ndarray, scores: np.ndarray) -> None:
        """Add one signal's per-file scores (`files` best first) and their ranks; equal scores
        share a rank (two files both named `helpers.py` are both first)."""
        file_score[files] += scores
        ranks.file_lists.append((name, files, np.searchsorted(-scores, -scores, side="left") + 1))

    for name, on, values, weight in (
        ("file_lexical", rules.file_lexical, corpus.lexical.file_scores(terms), FILE_LEXICAL_WEIGHT * (1.0 - ALPHA)),
        ("file_semantic", rules.file_semantic, file_similarity + 2.0, FILE_SEMANTIC_WEIGHT * ALPHA),
    ):
        if not on:
            continue
        order, contrib = reciprocal_ranks(values[files_allowed], files_allowed, CANDIDATES)
        add(name, order, weight * contrib)
    named = corpus.names.match(query)
    path_weight = PATH_WEIGHT_EXPLICIT if named.explicit else FILE_NAMED_WEIGHT
    by_name = named.scores if rules.named_files else {}
    if not by_name and rules.path_words:  # no file named outright: the files whose path words the query uses
        by_name, path_weight = corpus.words.match(query), PATH_WORDS_WEIGHT
    if by_name:
        named_ids = np.fromiter(by_name, dtype=np.int64, count=len(by_name))
        closeness = np.fromiter(by_name.values(), dtype=np.float64, count=len(named_ids))
        keep = in_sorted(named_ids, files_allowed)
        named_ids, closeness = named_ids[keep], closeness[keep]
        best_first = np.lexsort((named_ids, -closeness))
        add("path", named_ids[best_first], path_weight * unit * closeness[best_first])
    if rules.hybrid_coherence:
        coherent, strength = coherence(corpus.file_of[candidates], fused[candidates])
        if len(coherent):
            add("coherence", coherent, COHERENCE_WEIGHT * unit * strength)
    scored = np.flatnonzero(file_score)
    if len(scored) == 0:
        return scored
    members = corpus.file_chunks.gather(scored)  # file after file, each file's ascending
    if allowed is not None:
        members = members[allowed[members]]
    credited = best_of_each_file(members, corpus.file_of[members], fused, semantic.at)
    credited_files = corpus.file_of[credited]
    fused[credited] += file_score[credited_files]
    ranks.credited = credited
    return credited


def best_of_each_file(
    members: np.ndarray, files: np.ndarray, fused: np.ndarray, similarity: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """Of `members` (chunk ids, file after file, each file's ascending; `files` theirs), each
    file's chunk with the best `fused` score, ties to the best `similarity` (a value per chunk
    of the ids given), then to the lowest id: each file's run narrowed to its best fused
    scores, those to their best similarity, then its first. No sort (a lexsort of the few
    thousand members was a sixth of a small repository's warm query), and similarity is
    looked up only for the chunks tied at the top of their file."""
    top = _run_maxima(fused[members], files)
    members, files = members[top], files[top]
    top = _run_maxima(similarity(members), files)
    members, files = members[top], files[top]
    first: np.ndarray = members[_run_starts(files)]
    return first


def _run_starts(runs: np.ndarray) -> np.ndarray:
    """Which elements of `runs` (labels, equal ones consecutive) begin a run."""
    starts = np.ones(len(runs), dtype=bool)
    np.not_equal(runs[1:], runs[:-1], out=starts[1:])
    return starts


def _run_maxima(values: np.ndarray, runs: np.ndarray) -> np.ndarray:
    """Which of `values` equal the largest of their run (`runs`: aligned labels, equal ones
    consecutive)."""
    if not len(values):
        return np.zeros(0, dtype=bool)
    starts = np.flatnonzero(_run_starts(runs))
    peaks = np.maximum.reduceat(values, starts)
    at_peak: np.ndarray = values == np.repeat(peaks, np.diff(starts, append=len(values)))
    return at_peak


def in_sorted(values: np.ndarray, ascending: np.ndarray) -> np.ndarray:
    """Which of `values` are in `ascending` (sorted): `np.isin`'s answer by one binary search
    each. A query asks this of lists of at most a few hundred ids, where `np.isin`'s fixed
    cost (choosing a method, a lookup table spanning the ids' range) was ~50 µs a call."""
    if not len(ascending):
        return np.zeros(len(values), dtype=bool)
    at = np.searchsorted(ascending, values)
    at[at == len(ascending)] = 0  # past the end: compared with the first, never equal
    found: np.ndarray = ascending[at] == values
    return found


def _select(
    corpus: Corpus,
    candidates: np.ndarray,
    fused: np.ndarray,
    ranks: _Ranks,
    top_k: int,
    rules: RankingRules,
) -> list[Hit]:
    """The top k, diversified across files, with their fused scores (`search.ranked_result`
    makes them relative to the best of every root searched)."""
    held = diversify(corpus.file_of, candidates, fused, top_k, rules.diversify)
    of = ranks.of([i for _, i in held], corpus.file_of)
    return [Hit(i, s, of[i]) for s, i in held]


class _Ranks:
    """Where each list a query fused put its chunks, kept as the lists themselves and read
    only for the chunks kept (`of`): a dict a candidate, built for every one of up to a few
    thousand candidates, cost more than the rest of a small repository's query (issue 38's
    warm p50), while the answer shows the ranks of its top_k alone."""

    def __init__(self) -> None:
        #: chunk lists in fusion order, best first: (name, chunk ids); a chunk's rank is its place + 1
        self.chunk_lists: list[tuple[str, np.ndarray]] = []
        #: file-level lists: (name, files best first, their ranks, equal scores sharing one)
        self.file_lists: list[tuple[str, np.ndarray, np.ndarray]] = []
        #: the chunk each scored file's ranks are credited to (its best)
        self.credited: np.ndarray = np.empty(0, dtype=np.int64)

    def of(self, chunks: list[int], file_of: np.ndarray) -> dict[int, dict[str, int]]:
        """Each of `chunks`' ranks, keyed by list name in fusion order (the chunk lists, then
        its file's lists when the chunk is the one its file's ranks are credited to)."""
        out: dict[int, dict[str, int]] = {i: {} for i in chunks}
        wanted = np.sort(np.fromiter(out, dtype=np.int64, count=len(out)))
        for name, order in self.chunk_lists:
            for place in np.flatnonzero(in_sorted(order, wanted)).tolist():
                out[int(order[place])][name] = place + 1
        credited = wanted[in_sorted(wanted, np.sort(self.credited))]
        if len(credited) and self.file_lists:
            by_file = {int(file_of[i]): int(i) for i in credited}
            files = np.sort(np.fromiter(by_file, dtype=np.int64, count=len(by_file)))
            for name, listed, tied in self.file_lists:
                for place in np.flatnonzero(in_sorted(listed, files)).tolist():
                    out[by_file[int(listed[place])]][name] = int(tied[place])
        return out
