"""Per-file diversification shared by semantic and hybrid ranking: a file's further chunks keep
half their score per chunk already chosen from it, so the first results cover several files."""

from __future__ import annotations

import numpy as np

from search_engine.hits import SATURATION, coherence, diversify

# chunk id -> file id: chunks 0-2 in file 0, 3 in file 1, 4 in file 2
FILE_OF = np.array([0, 0, 0, 1, 2])


def test_a_second_file_comes_before_a_files_further_chunks() -> None:
    scores = np.array([0.9, 0.85, 0.8, 0.6, 0.3])
    held = diversify(FILE_OF, np.arange(5), scores, top_k=4)
    assert [i for _, i in held] == [0, 3, 1, 4]
    assert held[2][0] == 0.85 * SATURATION


def test_a_much_better_second_chunk_still_beats_a_weak_file() -> None:
    scores = np.array([0.9, 0.88, 0.1, 0.2, 0.1])
    assert [i for _, i in diversify(FILE_OF, np.arange(5), scores, top_k=3)] == [0, 1, 3]


def test_negative_scores_are_pushed_down_too() -> None:
    scores = np.array([-0.1, -0.2, -0.9, -0.5, -0.6])
    held = diversify(FILE_OF, np.arange(5), scores, top_k=5)
    assert held[1][0] == -0.2 * (2 - SATURATION) and [i for _, i in held] == [0, 1, 3, 4, 2]


def test_top_k_bounds_the_result_and_ties_go_to_the_earlier_chunk() -> None:
    scores = np.array([0.5, 0.5, 0.5, 0.5, 0.5])
    held = diversify(FILE_OF, np.arange(5), scores, top_k=3)
    assert [i for _, i in held] == [0, 3, 4]


def test_coherence_counts_only_what_stands_above_the_median() -> None:
    """File 0's three strong chunks outweigh file 1's one stronger chunk; file 2's chunks, at
    or below the median however many, add nothing."""
    files = np.array([0, 0, 0, 1, 2, 2, 2, 2, 2])
    scores = np.array([0.7, 0.6, 0.6, 0.9, 0.3, 0.3, 0.3, 0.3, 0.3])
    coherent, strength = coherence(files, scores)
    assert coherent.tolist() == [0, 1]
    assert np.allclose(strength, [1.0, 0.6])  # excess over the median 0.3: 1.0 and 0.6


def test_coherence_of_no_candidates_is_empty() -> None:
    coherent, strength = coherence(np.zeros(0, dtype=np.int64), np.zeros(0))
    assert len(coherent) == 0 and len(strength) == 0
