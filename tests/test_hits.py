"""Per-file diversification shared by semantic and hybrid ranking: a file's further chunks keep
half their score per chunk already chosen from it, so the first results cover several files."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from search_engine.ranking.hits import SATURATION, coherence, diversify

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


def _diversify_as_it_was(
    file_of: np.ndarray, candidates: np.ndarray, scores: np.ndarray, top_k: int
) -> list[tuple[float, int]]:
    """The selection before it kept a heap: the k-th best held score found by sorting every
    held score at each visit (quadratic), kept here as the reference its order must equal."""
    order = candidates[np.argsort(-scores[candidates], kind="stable")]
    held: list[tuple[float, int]] = []
    per_file: dict[int, int] = {}
    floor = -np.inf
    for i in order.tolist():
        raw = float(scores[i])
        if len(held) >= top_k and raw <= floor:
            break
        f = int(file_of[i])
        seen = per_file.get(f, 0)
        decay = SATURATION**seen
        held.append((raw * decay if raw >= 0 else raw * (2.0 - decay), i))
        per_file[f] = seen + 1
        if len(held) >= top_k:
            floor = sorted(s for s, _ in held)[-top_k]
    held.sort(key=lambda h: (-h[0], h[1]))
    return held[:top_k]


@st.composite
def _selections(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """A corpus (each chunk's file, few files so saturation bites), its scores (drawn from a
    small set too, so ties are common, with negatives), a subset of candidates, and a top_k."""
    n = draw(st.integers(1, 60))
    file_of = np.array(draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)))
    levels = st.sampled_from([-1.0, -0.5, -0.25, 0.0, 0.125, 0.25, 0.5, 0.75, 1.0])
    scores = np.array(draw(st.lists(levels | st.floats(-2, 2), min_size=n, max_size=n)))
    chosen = draw(st.lists(st.integers(0, n - 1), unique=True, min_size=0, max_size=n))
    return file_of, np.array(chosen, dtype=np.int64), scores, draw(st.integers(1, n + 2))


@pytest.mark.slow  # ~5 ms an example
@settings(max_examples=500, deadline=None)
@given(_selections())
def test_the_selection_equals_the_quadratic_one_it_replaced(case) -> None:
    file_of, candidates, scores, top_k = case
    assert diversify(file_of, candidates, scores, top_k) == _diversify_as_it_was(file_of, candidates, scores, top_k)


def _lines_run(fn: Callable[[], object]) -> int:
    """How many lines of Python `fn()` runs, its callees' included: a count of the work done
    that, unlike a clock, does not depend on what else the machine is doing."""
    lines = 0

    def trace(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal lines
        lines += event == "line"
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        fn()
    finally:
        sys.settrace(previous)
    return lines


def test_a_large_top_k_costs_n_log_n_not_n_squared() -> None:
    """4,000 candidates over 200 files at top_k 1,000: a few Python lines per candidate
    (the sorts run in C). Sorting the held scores at every visit ran a line per held score
    per visit: 2,000 visits past the k-th times 1,000-4,000 held, millions of lines (and a
    minute at top_k 10,000 on a real index)."""
    rng = np.random.default_rng(7)
    n = 4000
    file_of, scores = rng.integers(0, n // 20, n), rng.random(n)
    held: list[tuple[float, int]] = []
    lines = _lines_run(lambda: held.extend(diversify(file_of, np.arange(n), scores, top_k=1000)))
    assert len(held) == 1000
    assert lines < 20 * n, f"{lines:,} lines for {n:,} candidates"
