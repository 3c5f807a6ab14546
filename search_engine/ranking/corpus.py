"""Everything ranking needs about one index generation, derived once and kept warm.

The index stores chunks, their vectors and the lexical index; ranking also needs to reason
about files (results are judged by whether the right *file* comes first, and a file's chunks
vote together), about defined symbols and about which files are named after a symbol.
Deriving those per query would cost more than the query itself, so a `Corpus` is built once
per index generation, from the index's columns alone (no chunk text is read), and shared by
every search of it.

It also answers which files a query *names*: `Tokenizer` names `tokenizer.py`, and an agent
that half-remembers a file types `web_urldispatcer`, `hlpers.py` or `client/sesion`. BM25 sees
path words but not typos, so `FileNames` compares the query with the files' paths through
rapidfuzz (exact spellings first, near misses only when nothing is named exactly).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import numpy as np
from rapidfuzz import fuzz, process

from search_engine.chunking.chunk import Chunk, ChunkSequence
from search_engine.index.chunk_table import ChunkTable, take
from search_engine.index.vectors import JoinedVectors, VectorIndex, Vectors
from search_engine.ranking.code_tokens import query_terms
from search_engine.ranking.doc_comments import documented_declarations
from search_engine.ranking.file_words import FileWords
from search_engine.ranking.lexical import JoinedLexical, Lexical, LexicalIndex
from search_engine.ranking.priors import PathPriors, TreeFacts
from search_engine.ranking.rules import ALL_ON, RankingRules
from search_engine.ranking.symbols import MIN_FUZZY_LEN, JoinedSymbols, SymbolIndex, Symbols, normalize

# A query that could name a file or a path: one token of word characters, dots, dashes and
# slashes, with a letter somewhere (`web_urldispatcher`, `hlpers.py`, `client/sesion`).
_PATH_QUERY_RE = re.compile(r"^[\w.\-/]*[^\W\d][\w.\-/]*$")
# rapidfuzz ratio (0-100) a path must reach to count as named by a near miss: one wrong letter
# in a six-letter stem (`hlpers` ~ `helpers`, 92) or a missing word prefix (`urldispatcher` ~
# `web_urldispatcher`, 90) pass; words that merely share letters do not.
PATH_FUZZY_CUTOFF = 85.0
# Near misses kept per query: a typo should lift the file it was meant for, not a family.
PATH_FUZZY_LIMIT = 3
# Deepest partial path compared (`pkg/sub/dir/file.py`).
MAX_PATH_DEPTH = 4
# The share of a codebase's plain code files that must use a word for it to name things there
# (`Corpus.names_things`): most of them. "test" is in 53% of vitest's, but also in 6-27% of
# ordinary libraries' (doc tests, `#[cfg(test)]`, test helpers), where it still asks for tests.
CODEBASE_WORD_SHARE = 0.5
# Chunk kinds that define no function or class: a file of only these (imports, `export * from`,
# a `package` line) re-exports.
_NO_DEFINITION = frozenset({"module", "window", "section", "namespace"})


@dataclass(frozen=True, slots=True)
class Corpus:
    """Chunks plus the per-file and per-symbol structures derived from them.

    `files` is the lexical index's file order; `file_of[i]` is chunk i's file id and
    `file_chunks` the chunk ids of each file (`FileChunks`). `file_vectors` are the normalized
    means of each file's chunk vectors: what the file as a whole is about.
    """

    chunks: Sequence[Chunk]
    vectors: Vectors
    lexical: Lexical
    symbols: Symbols
    files: list[str]
    file_of: np.ndarray
    file_chunks: FileChunks
    file_vectors: np.ndarray
    names: FileNames
    words: FileWords
    _file_languages: list[str | None]
    #: What the path priors read from the index's paths as a whole, found once.
    tree: TreeFacts
    #: Reads what the path priors ask of a file's code (`TreeFacts`).
    _code: _CodeReader
    _priors: dict[PathPriors, np.ndarray] = field(default_factory=dict)
    _names_things: dict[str, bool] = field(default_factory=dict)
    #: A joined corpus's generation (its files first): its path priors are reused.
    _base: Corpus | None = None

    @classmethod
    def build(cls, chunks: ChunkTable, vectors: VectorIndex, lexical: LexicalIndex) -> Corpus:
        """From the index's columns: the symbol index comes from the definitions stored at
        build time, file vectors were computed then too; the only chunk text read is that of
        the C/C++ headers with a source file beside them and those sources, and of the files
        named as re-exports (`TreeFacts`)."""
        files = list(lexical.files)
        if files != chunks.paths:
            raise ValueError("the chunk table and the lexical index list different files")
        file_of = np.asarray(chunks.file_of, dtype=np.int64)
        def_chunk, def_factor, def_names = chunks.definitions()
        def_paths = [files[f] for f in file_of[def_chunk].tolist()] if len(def_chunk) else []
        symbols = SymbolIndex(np.asarray(def_chunk), def_paths, def_names, np.asarray(def_factor))
        languages = list(chunks.languages)
        file_chunks = FileChunks.of(file_of, len(files))
        code = _CodeReader(chunks, file_chunks, lambda: {path: f for f, path in enumerate(files)})
        return cls(
            chunks,
            vectors,
            lexical,
            symbols,
            files,
            file_of,
            file_chunks,
            np.asarray(vectors.file_vectors, dtype=np.float32),
            FileNames(files),
            FileWords(files),
            languages,
            TreeFacts.of(files, code.documented, code.defines),
            code,
        )

    def join(self, live: LivePart) -> Corpus:
        """This generation's corpus followed by the `live` files' (chunk and file ids after
        this one's), ranked as one index: BM25 with both sides' statistics (`Postings.beside`),
        the base's rescored vectors beside every live one, path priors judged against this
        tree with the live files judged again as they are now (`TreeFacts.beside`). A live file
        that is also here is hidden by the caller's mask, not removed."""
        n_chunks, n_files = len(self.chunks), len(self.files)
        files = self.files + live.files
        chunks = _JoinedChunks(self.chunks, live.chunks)
        file_chunks = self.file_chunks.followed_by(FileChunks.of(live.file_of, len(live.files)), n_chunks)
        base_ids = self._code.ids
        code = _CodeReader(chunks, file_chunks, lambda: base_ids() | {p: n_files + i for i, p in enumerate(live.files)})
        return Corpus(
            chunks,
            JoinedVectors(_as_index(self.vectors), live.vectors),
            JoinedLexical(_as_lexical(self.lexical), live.lexical),
            JoinedSymbols(self.symbols, SymbolIndex.build(live.chunks), n_chunks),
            files,
            np.concatenate([self.file_of, live.file_of + n_files]),
            file_chunks,
            np.concatenate([self.file_vectors, np.asarray(live.vectors.file_vectors, dtype=np.float32)]),
            self.names.extended(live.files),
            self.words.extended(live.files),
            self._file_languages + live.languages,
            self.tree.beside(live.files, code.has, code.documented, code.defines),
            code,
            _base=self,
        )

    def warm_like(self, other: Corpus) -> None:
        """Make now the lazily built tables `other` (the previous generation) has made: the
        path priors variants and file-name keys its searches asked for, so the first searches
        of this generation do not pay for them."""
        for priors in list(other._priors):
            self.file_priors(priors)
        self.names.warm_like(other.names)

    def files_allowed(self, allowed: np.ndarray | None) -> np.ndarray:
        """Ids (ascending) of the files with a chunk `allowed` lets through (a boolean mask
        over chunks; None: every file)."""
        if allowed is None:
            return np.arange(len(self.files))
        return np.flatnonzero(np.bincount(self.file_of[allowed], minlength=len(self.files)))

    def priors_for(self, query: str, rules: RankingRules = ALL_ON) -> np.ndarray:
        """Each file's path-prior factor for `query` under `rules` (see `search_engine.ranking.priors`)."""
        return self.file_priors(PathPriors.for_query(query, self.tree.satellites, rules, self.names_things))

    def names_things(self, word: str) -> bool:
        """Whether `word` names things in this codebase: at least `CODEBASE_WORD_SHARE` of
        its plain code files (those no path prior scales down: not tests, docs, examples,
        config, ...) use it, in their identifiers, text or paths (BM25's documents, so stemmed:
        "testing" is `test`). In a test runner "test" is the domain, in a spec validator
        "spec", and a query saying it asks about that code, not for test files; elsewhere
        fewer files say "test", and the word asks for tests. Found once per word."""
        known = self._names_things.get(word)
        if known is None:
            terms = query_terms(word, abbreviate=False)
            plain = self.file_priors(PathPriors()) == 1.0
            used = self.lexical.file_scores(terms) > 0 if terms else np.zeros(len(self.files), dtype=bool)
            n_plain = int(np.count_nonzero(plain))
            known = bool(n_plain) and int(np.count_nonzero(used & plain)) >= CODEBASE_WORD_SHARE * n_plain
            self._names_things[word] = known
        return known

    def file_priors(self, priors: PathPriors) -> np.ndarray:
        """Each file's path-prior factor under `priors` (a handful of variants exist, each
        computed once)."""
        factors = self._priors.get(priors)
        if factors is None:
            if self._base is not None:
                n = len(self._base.files)
                live = priors.factors(self.files[n:], self._file_languages[n:], self.tree)
                factors = np.concatenate([self._base.file_priors(priors), np.array(live, dtype=np.float64)])
            else:
                factors = np.array(priors.factors(self.files, self._file_languages, self.tree))
            self._priors[priors] = factors
        return factors


class _CodeReader:
    """What the path priors ask of a few files' code (`TreeFacts`), read from their chunks by
    path: `ids` (path -> file id; a later file of the same path wins, as a live file hides the
    generation's) is built by `file_ids` on first use, which most indexes never reach (no C/C++
    header pair, no file named as a re-export)."""

    def __init__(
        self, chunks: Sequence[Chunk], file_chunks: FileChunks, file_ids: Callable[[], dict[str, int]]
    ) -> None:
        self._chunks, self._file_chunks, self._file_ids = chunks, file_chunks, file_ids
        self._ids: dict[str, int] | None = None

    def ids(self) -> dict[str, int]:
        if self._ids is None:
            self._ids = self._file_ids()
        return self._ids

    def has(self, path: str) -> bool:
        return path in self.ids()

    def documented(self, path: str) -> int:
        """The file's documented declarations (`documented_declarations`)."""
        return documented_declarations(self._of(path))

    def defines(self, path: str) -> bool:
        """Whether the file defines a function or class (a chunk of another kind than `_NO_DEFINITION`)."""
        return any(c.kind not in _NO_DEFINITION for c in self._of(path))

    def _of(self, path: str) -> list[Chunk]:
        return take(self._chunks, self._file_chunks.gather(np.array([self.ids()[path]])).tolist())


@dataclass(frozen=True, slots=True)
class LivePart:
    """The live files' side of a joined corpus (`Corpus.join`): their chunks in file order,
    vectors, BM25 made `beside` the generation's, each chunk's file and each file's language."""

    chunks: list[Chunk]
    vectors: VectorIndex
    lexical: LexicalIndex
    files: list[str]
    file_of: np.ndarray
    languages: list[str | None]


@dataclass(frozen=True, slots=True)
class FileChunks:
    """The chunk ids of every file, laid out flat (CSR): file f's are
    `members[bounds[f] : bounds[f + 1]]`, ascending. Hybrid ranking gathers the chunks of a
    few hundred scored files per query; one array per file made that a Python loop over them
    (a tenth of a small repository's warm query), where `gather` is a handful of numpy calls."""

    members: np.ndarray
    bounds: np.ndarray

    @classmethod
    def of(cls, file_of: np.ndarray, n_files: int) -> FileChunks:
        """From each chunk's file id (`file_of`, any order) over `n_files` files."""
        members = np.argsort(file_of, kind="stable")
        return cls(members, np.searchsorted(file_of[members], np.arange(n_files + 1)))

    def gather(self, files: np.ndarray) -> np.ndarray:
        """The chunk ids of each of `files`, file after file in that order: one run per file,
        each starting where its file's does in `members`."""
        starts = self.bounds[files]
        counts = self.bounds[files + 1] - starts
        # Element j of the result is members[j + (start of its file's run - where that run
        # begins in the result)]: that difference repeated over each run.
        shift = np.repeat(starts - (np.cumsum(counts) - counts), counts)
        chunks: np.ndarray = self.members[np.arange(len(shift)) + shift]
        return chunks

    def followed_by(self, other: FileChunks, n_chunks: int) -> FileChunks:
        """These files followed by `other`'s, whose chunk ids start after these `n_chunks`."""
        return FileChunks(
            np.concatenate([self.members, other.members + n_chunks]),
            np.concatenate([self.bounds, other.bounds[1:] + len(self.members)]),
        )


class _JoinedChunks(ChunkSequence):
    """A generation's chunks followed by the live files'."""

    def __init__(self, base: Sequence[Chunk], live: Sequence[Chunk]) -> None:
        self._base, self._live = base, live

    def __len__(self) -> int:
        return len(self._base) + len(self._live)

    def _chunk_at(self, i: int) -> Chunk:
        n = len(self._base)
        return self._base[i] if i < n else self._live[i - n]


def _as_index(vectors: Vectors) -> VectorIndex:
    if not isinstance(vectors, VectorIndex):
        raise TypeError("only a generation's corpus can be joined")
    return vectors


def _as_lexical(lexical: Lexical) -> LexicalIndex:
    if not isinstance(lexical, LexicalIndex):
        raise TypeError("only a generation's corpus can be joined")
    return lexical


@dataclass(frozen=True, slots=True)
class NamedFiles:
    """Files a query names, each with a score in (0, 1] (1.0 when spelled exactly, the rapidfuzz
    ratio / 100 for a near miss). `explicit` when the query is unmistakably a path (it has a
    slash or ends in an extension some file has), not an identifier that may also name a file."""

    scores: dict[int, float]
    explicit: bool


class FileNames:
    """Which files a path-like query names, exactly or fuzzily.

    A query's last component is compared with file stems (plural-insensitive, case, `_` and `-`
    ignored, so `Tokenizer` names `tokenizers.py`); with a slash, as many trailing directories
    are compared too (`client/sesion` ~ `client/session.py`), and with a known extension the
    extension must be there as well (`hlpers.py` names `helpers.py`, not `helpers.md`). The keys
    per (depth, with extension) are built on first use and kept for the index generation.
    """

    def __init__(self, files: Sequence[str], _after: FileNames | None = None) -> None:
        """`_after`: `extended`'s, these files' ids follow its."""
        paths = [PurePosixPath(p) for p in files]
        before: list[PurePosixPath] = _after._paths if _after is not None else []
        suffixes: frozenset[str] = _after._suffixes if _after is not None else frozenset()
        self._after = _after
        self._paths: list[PurePosixPath] = before + paths
        self._suffixes: frozenset[str] = suffixes | {p.suffix.lower() for p in paths if p.suffix}
        self._keys: dict[tuple[int, bool], tuple[dict[str, list[int]], list[str]]] = {}

    def warm_like(self, other: FileNames) -> None:
        """Build the key tables `other` has built."""
        for depth, with_suffix in list(other._keys):
            self._keys_at(depth, with_suffix)

    def extended(self, files: Sequence[str]) -> FileNames:
        """These files followed by `files` (ids after these), without reading these again:
        its key tables start from these (built once here, shared by every extension)."""
        return FileNames(files, self)

    def match(self, query: str) -> NamedFiles:
        """The files `query` names; empty for anything that is not a single path-like token.
        Near misses are looked for only when no file is named exactly, so `Tokenizer` lifts
        `tokenizer.py` and not also `tokenize.py`."""
        text = query.strip()
        if not _PATH_QUERY_RE.match(text):
            return NamedFiles({}, False)
        parts = [p for p in text.split("/") if p not in ("", ".", "..")][-MAX_PATH_DEPTH:]
        if not parts:
            return NamedFiles({}, False)
        last = PurePosixPath(parts[-1])
        suffix = last.suffix.lower() if last.suffix.lower() in self._suffixes and last.stem else ""
        if suffix:
            parts[-1] = last.stem
        explicit = "/" in text or bool(suffix)
        by_key, keys = self._keys_at(len(parts), bool(suffix))
        key = _path_key(parts, suffix)
        exact = by_key.get(key)
        if exact:
            return NamedFiles(dict.fromkeys(exact, 1.0), explicit)
        if len(_path_key(parts, "")) < MIN_FUZZY_LEN:
            return NamedFiles({}, explicit)
        scores: dict[int, float] = {}
        for other, ratio, _ in process.extract(
            key, keys, scorer=fuzz.ratio, score_cutoff=PATH_FUZZY_CUTOFF, limit=PATH_FUZZY_LIMIT
        ):
            for f in by_key[other]:
                scores[f] = max(ratio / 100.0, scores.get(f, 0.0))
        return NamedFiles(scores, explicit)

    def _keys_at(self, depth: int, with_suffix: bool) -> tuple[dict[str, list[int]], list[str]]:
        """Each file's key over its last `depth` components (two threads racing here build the
        same dict; either is kept)."""
        cached = self._keys.get((depth, with_suffix))
        if cached is None:
            by_key: dict[str, list[int]] = {}
            first = 0
            if self._after is not None:
                by_key = dict(self._after._keys_at(depth, with_suffix)[0])  # its lists are replaced, not changed
                first = len(self._after._paths)
            own: set[str] = set()
            for f in range(first, len(self._paths)):
                key = _file_key(self._paths[f], depth, with_suffix)
                if key not in own:  # a list of `_after` is copied before it grows
                    by_key[key] = list(by_key.get(key, []))
                    own.add(key)
                by_key[key].append(f)
            cached = self._keys[(depth, with_suffix)] = (by_key, list(by_key))
        return cached


def _file_key(path: PurePosixPath, depth: int, with_suffix: bool) -> str:
    """A file's key over its last `depth` components (`_path_key`)."""
    parts = [*path.parent.parts[-(depth - 1) :], path.stem] if depth > 1 else [path.stem]
    return _path_key(parts, path.suffix.lower() if with_suffix else "")


def _part_key(part: str) -> str:
    return normalize(part).replace("-", "")


def _path_key(parts: Sequence[str], suffix: str) -> str:
    """Comparison key of a (partial) path: components normalized like identifiers, the stem
    without a plural `s`, then the extension if one is compared (`web/Client_Sessions.py` ->
    `web/clientsession.py`)."""
    *dirs, stem = parts
    return "/".join([*map(_part_key, dirs), _part_key(stem).rstrip("s")]) + suffix
