"""The array steps hybrid ranking made cheaper give what the code they replaced gave: the flat
per-file chunk lists (`FileChunks`) what the per-file arrays gave, for chunks in any file
order, files with no chunks and joined corpora; the choice of each scored file's best chunk
(`best_of_each_file`) what the lexsort gave, under masks; `in_sorted` what `np.isin` says."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from search_engine.ranking.corpus import FileChunks
from search_engine.ranking.hybrid import best_of_each_file, in_sorted

N_FILES = 12
file_ids = st.lists(st.integers(0, N_FILES - 1), max_size=60)


def _per_file(file_of: np.ndarray, files: np.ndarray) -> np.ndarray:
    """What `Corpus` kept before: one array of chunk ids per file, concatenated for `files`."""
    return np.concatenate([np.zeros(0, dtype=np.int64), *(np.flatnonzero(file_of == f) for f in files.tolist())])


@given(file_ids, st.sets(st.integers(0, N_FILES - 1)))
@settings(max_examples=300, deadline=None)
def test_gather_equals_concatenating_each_files_chunks(file_of: list[int], picked: set[int]) -> None:
    owner = np.asarray(file_of, dtype=np.int64)
    files = np.asarray(sorted(picked), dtype=np.int64)
    gathered = FileChunks.of(owner, N_FILES).gather(files)
    assert np.array_equal(gathered, _per_file(owner, files))


@given(file_ids, file_ids, st.sets(st.integers(0, 2 * N_FILES - 1)))
@settings(max_examples=300, deadline=None)
def test_a_joined_corpus_gathers_like_one_built_from_both(base: list[int], live: list[int], picked: set[int]) -> None:
    """`followed_by` (a live layer's files after a generation's, as `Corpus.join` lays them
    out) is the layout of the joined ids built at once."""
    first, second = np.asarray(base, dtype=np.int64), np.asarray(live, dtype=np.int64)
    joined = FileChunks.of(first, N_FILES).followed_by(FileChunks.of(second, N_FILES), len(first))
    owner = np.concatenate([first, second + N_FILES])
    files = np.asarray(sorted(picked), dtype=np.int64)
    assert np.array_equal(joined.gather(files), _per_file(owner, files))
    assert np.array_equal(joined.bounds, FileChunks.of(owner, 2 * N_FILES).bounds)


scores = st.sampled_from([0.0, 0.0, 0.25, 0.5, 1.0])  # few values: many ties


@given(file_ids, st.data())
@settings(max_examples=300, deadline=None)
def test_each_files_best_chunk_is_the_one_the_lexsort_chose(file_of: list[int], data: st.DataObject) -> None:
    owner = np.asarray(file_of, dtype=np.int64)
    n = len(owner)
    fused = np.asarray(data.draw(st.lists(scores, min_size=n, max_size=n)), dtype=np.float64)
    similar = np.asarray(data.draw(st.lists(scores, min_size=n, max_size=n)), dtype=np.float32)
    allowed = np.asarray(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    files = np.flatnonzero(np.bincount(owner[allowed], minlength=N_FILES))
    members = FileChunks.of(owner, N_FILES).gather(files)
    members = members[allowed[members]]
    looked_up: list[np.ndarray] = []

    def similarity(ids: np.ndarray) -> np.ndarray:
        looked_up.append(ids)
        values: np.ndarray = similar[ids]
        return values

    chosen = best_of_each_file(members, owner[members], fused, similarity)
    # The code it replaced: sort by file, best fused, most similar (stable: lowest id), take firsts.
    order = np.lexsort((-similar[members], -fused[members], owner[members]))
    ranked, ranked_files = members[order], owner[members][order]
    first = np.ones(len(ranked), dtype=bool)
    first[1:] = ranked_files[1:] != ranked_files[:-1]
    assert np.array_equal(chosen, ranked[first])
    # Similarity is asked only of chunks tied at the top of their file's fused scores.
    asked = np.concatenate(looked_up)
    best = {f: fused[members[owner[members] == f]].max() for f in owner[members].tolist()}
    assert all(fused[i] == best[int(owner[i])] for i in asked.tolist())


@given(st.lists(st.integers(-3, 40), max_size=30), st.sets(st.integers(0, 40), max_size=30))
@settings(max_examples=300, deadline=None)
def test_in_sorted_says_what_isin_says(values: list[int], members: set[int]) -> None:
    ids = np.asarray(values, dtype=np.int64)
    ascending = np.asarray(sorted(members), dtype=np.int64)
    assert np.array_equal(in_sorted(ids, ascending), np.isin(ids, ascending))
