"""Everything ranking needs about one index generation, derived once and kept warm.

The index stores chunks, their vectors and the lexical index; ranking also needs to reason
about files (results are judged by whether the right *file* comes first, and a file's chunks
vote together), about defined symbols and about which files are named after a symbol.
Deriving those per query would cost more than the query itself, so a `Corpus` is built once
per index generation (milliseconds per thousand chunks) and shared by every search of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import numpy as np

from search_engine.chunks import Chunk
from search_engine.lexical import LexicalIndex
from search_engine.priors import PathPriors
from search_engine.symbols import SymbolIndex, normalize


@dataclass(frozen=True, slots=True)
class Corpus:
    """Chunks plus the per-file and per-symbol structures derived from them.

    `files` is the lexical index's file order; `file_of[i]` is chunk i's file id and
    `file_chunks[f]` the chunk ids of file f. `file_vectors` are the normalized means of each
    file's chunk vectors: what the file as a whole is about.
    """

    chunks: Sequence[Chunk]
    vectors: np.ndarray
    lexical: LexicalIndex
    symbols: SymbolIndex
    files: list[str]
    file_of: np.ndarray
    file_chunks: list[np.ndarray]
    file_vectors: np.ndarray
    _file_stems: dict[str, list[int]]
    _file_languages: list[str | None]
    _priors: dict[PathPriors, np.ndarray] = field(default_factory=dict)

    @classmethod
    def build(cls, chunks: Sequence[Chunk], vectors: np.ndarray, lexical: LexicalIndex) -> Corpus:
        files = list(lexical.files)
        file_id = {p: i for i, p in enumerate(files)}
        file_of = np.fromiter((file_id[c.path] for c in chunks), dtype=np.int64, count=len(chunks))
        order = np.argsort(file_of, kind="stable")
        bounds = np.searchsorted(file_of[order], np.arange(len(files) + 1))
        file_chunks = [order[bounds[f]:bounds[f + 1]] for f in range(len(files))]
        file_vectors = np.zeros((len(files), vectors.shape[1] if vectors.ndim == 2 else 0), dtype=np.float32)
        if len(chunks):
            # Every file has at least one chunk (files come from chunk paths): reduceat's
            # segments are never empty.
            file_vectors = np.add.reduceat(np.asarray(vectors, dtype=np.float32)[order], bounds[:-1], axis=0)
            file_vectors /= np.maximum(np.linalg.norm(file_vectors, axis=1, keepdims=True), 1e-9)
        stems: dict[str, list[int]] = {}
        for f, path in enumerate(files):
            stems.setdefault(normalize(PurePosixPath(path).stem).rstrip("s"), []).append(f)
        languages = [chunks[int(m[0])].language if len(m) else None for m in file_chunks]
        return cls(
            chunks, vectors, lexical, SymbolIndex.build(chunks), files, file_of, file_chunks,
            file_vectors, stems, languages,
        )

    def file_priors(self, priors: PathPriors) -> np.ndarray:
        """Each file's path-prior factor under `priors` (a handful of variants exist, each
        computed once)."""
        factors = self._priors.get(priors)
        if factors is None:
            factors = np.array([priors.factor(p, lang) for p, lang in zip(self.files, self._file_languages)])
            self._priors[priors] = factors
        return factors

    def files_named(self, name: str) -> list[int]:
        """Files whose stem is `name` (normalized, plural-insensitive): `tokenizer.py` for
        `Tokenizer`, `exceptions.py` for `exception`."""
        return self._file_stems.get(normalize(name).rstrip("s"), [])
