"""`Hit`: one ranked chunk, as semantic and hybrid ranking hand it to the engine, and the
per-file diversification both modes apply before handing them over.

Results are judged by whether the right *files* come first; ten slices of one long file that
all resemble the query crowd out the second file that was also wanted. So each further chunk
from an already chosen file keeps only `SATURATION` of its score per chunk chosen before it.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

# Each further chunk from an already selected file keeps this fraction of its score.
SATURATION = 0.5


@dataclass(frozen=True, slots=True)
class Hit:
    """A chunk's index in the corpus, its score (a cosine for semantic search; for hybrid the
    fused score, which the match shows relative to the best, 1.0 first) and its rank in each component list it
    appeared in (`lexical`, `semantic`, `symbol`, and the file-level `file_lexical`,
    `file_semantic`, `path`, `coherence`), so a caller can see why it matched."""

    chunk: int
    score: float
    ranks: dict[str, int]


def coherence(files: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """How strongly each file's candidates as a group match (`files` and `scores` aligned, one
    row per candidate): the sum of their scores' excess over the candidates' median, relative
    to the strongest file's (1.0). Returns the files with any excess, strongest first (ties:
    the lower id), and their strengths.

    A module about the question has several chunks that match it well, a stray look-alike
    elsewhere one; counting only the excess over the median keeps a long file's many middling
    chunks from adding up to strength by number alone."""
    excess = np.maximum(scores - np.median(scores), 0.0) if len(scores) else np.zeros(0)
    ids, inverse = np.unique(files, return_inverse=True)
    sums = np.bincount(inverse, weights=excess, minlength=len(ids))
    keep = sums > 0
    ids, sums = ids[keep], sums[keep]
    order = np.argsort(-sums, kind="stable")
    return ids[order], sums[order] / sums.max() if len(sums) else sums


def by_file_best_first(files: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Positions of the candidates (`files` and `scores` aligned) grouped by file, ascending,
    each file's best score first. Equal scores keep a fixed order, not necessarily the lower
    position first: numpy's stable sorts (and `lexsort`) took ~0.5 ms for the 4,000 chunks a
    semantic query rescores, two unstable sorts take a fifth of that."""
    by_score = np.argsort(-scores)
    place = np.empty(len(scores), dtype=np.int64)
    place[by_score] = np.arange(len(scores))
    order: np.ndarray = np.argsort(files.astype(np.int64) * max(len(scores), 1) + place)  # keys are distinct
    return order


def saturated(files: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Each candidate's score as `diversify` would decay it (`files` and `scores` aligned, one
    row per candidate): a file's n-th best candidate keeps SATURATION**n of its score (a
    negative score is pushed down by the same fraction).

    Greedy selection visits a file's chunks best first and keeps every one it visits, so a
    file's n-th best chunk always has exactly n chosen before it: `diversify`'s top k are the
    top k of these values. Cutting a long candidate list by them, rather than by raw score,
    keeps what the selection needs: by raw score, the best hundred chunks of a large index can
    come from three long files, whose further chunks are worth a fraction each, and the
    results then held nothing else."""
    order = by_file_best_first(files, scores)
    grouped = files[order]
    first = np.searchsorted(grouped, grouped, side="left")  # where each file's run starts
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = np.arange(len(order)) - first
    decay = SATURATION**ranks
    decayed: np.ndarray = np.where(scores >= 0, scores * decay, scores * (2.0 - decay))
    return decayed


def diversify(
    file_of: np.ndarray, candidates: np.ndarray, scores: np.ndarray, top_k: int, spread: bool = True
) -> list[tuple[float, int]]:
    """Greedy top-k of `candidates` (chunk ids) by `scores` (indexed by chunk id) with per-file
    saturation: a file's n-th chosen chunk counts SATURATION**n (a negative score is pushed
    down by the same fraction; `spread` False: no decay, the ranking rule switched off).
    Returns (decayed score, chunk) best first.

    Candidates are visited best first; once k are held and the next raw score cannot beat the
    weakest of the best k held even undecayed, nothing later can either. That weakest is the
    root of a min-heap of the best k decayed scores, so a visit costs log k and the whole
    selection n log n: re-sorting the held scores at each visit made top_k 10,000 take a minute."""
    if top_k <= 0:
        return []
    order = candidates[np.argsort(-scores[candidates], kind="stable")]
    held: list[tuple[float, int]] = []
    best_k: list[float] = []  # min-heap of the k best decayed scores held so far
    per_file: dict[int, int] = {}
    saturation = SATURATION if spread else 1.0
    for i in order.tolist():
        raw = float(scores[i])
        if len(best_k) == top_k and raw <= best_k[0]:
            break
        f = int(file_of[i])
        seen = per_file.get(f, 0)
        decay = saturation**seen
        score = raw * decay if raw >= 0 else raw * (2.0 - decay)
        held.append((score, i))
        per_file[f] = seen + 1
        if len(best_k) < top_k:
            heapq.heappush(best_k, score)
        elif score > best_k[0]:
            heapq.heapreplace(best_k, score)
    held.sort(key=lambda h: (-h[0], h[1]))
    return held[:top_k]
