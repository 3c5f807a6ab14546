"""`Hit`: one ranked chunk, as semantic and hybrid ranking hand it to the engine."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Hit:
    """A chunk's index in the corpus, its score (a cosine for semantic search; for hybrid the
    fused score relative to the best, 1.0 first) and its rank in each component list it
    appeared in (`lexical`, `semantic`, `symbol`, and the file-level `file_lexical`,
    `file_semantic`, `path`, `coherence`), so a caller can see why it matched."""

    chunk: int
    score: float
    ranks: dict[str, int]
