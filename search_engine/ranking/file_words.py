"""Which files a question's words name: `show_exceptions.rb` for "exception rendering",
`internals/attr.rs` for "field-level serde attributes", `format.h` for `formatter`.

Projects name files after what they do, and a question often uses the same word as the file
name, inflected differently. BM25 sees path words too (`search_engine.ranking.lexical` adds them to
every chunk), but stemmed and among the body's words, where a word the whole project uses
("name", "format") drowns the one file named after it; and stems miss derivations
(`formatter` stems to `formatt`, "formatting" to `format`). So, as semble does, a query's words
are compared with the words of each file's stem and folder (`show_exceptions.rb` in
`lib/sinatra/`: show, exceptions, sinatra), a word matching a path word when one is a prefix of
the other, three letters at least ("exception" ~ `exceptions`, "attributes" ~ `attr`). A
file scores the share of the query's words it matches, each word weighted by how few files it
matches (a word in every path says nothing); shares under `MIN_SHARE` are dropped.

The path words are indexed once per index generation (sorted, so a query word finds the longer
words it begins in one bisection), and a query reads only the files its words name, so a
query's cost follows those, never the number of files times Python.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from search_engine.ranking.code_tokens import STOPWORDS, word_parts

#: Words shorter than this are neither compared nor prefixes ("io" would begin half the paths).
MIN_WORD_LEN = 3
#: A file must match this share of the query's (weighted) words to score at all.
MIN_SHARE = 0.1
_QUERY_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What separates the pieces of a file or folder name: `_`, `-`, `.` and anything not ASCII
# alphanumeric (the camelCase humps inside a piece are the tokenizer's `word_parts`).
_SEPARATOR_RE = re.compile(r"[^A-Za-z0-9]+")


def path_words(path: str) -> set[str]:
    """The lowercased words of a file's stem and of its folder's name."""
    *_, folder, name = ["", *path.split("/")]
    stem = name.rsplit(".", 1)[0] if "." in name[1:] else name  # a dotfile (`.bashrc`) is its own stem
    return {*_name_words(stem), *_name_words(folder)}


@lru_cache(maxsize=65536)
def _name_words(name: str) -> tuple[str, ...]:
    """The words of one file or folder name; cached, since a tree repeats its names (`utils`,
    `tests`, `__init__`) and an index of 12,000 files was 76 ms of regex without it."""
    return tuple(w for piece in _SEPARATOR_RE.split(name) if piece for w in word_parts(piece) if len(w) >= MIN_WORD_LEN)


def query_words(query: str) -> list[str]:
    """The words of a query worth comparing with file names, lowercased, once each."""
    words = (w.lower() for w in _QUERY_WORD_RE.findall(query))
    return list(dict.fromkeys(w for w in words if len(w) >= MIN_WORD_LEN and w not in STOPWORDS))


class FileWords:
    """The words of every file's stem and folder, and which files a query's words name."""

    def __init__(self, files: Sequence[str], _after: FileWords | None = None) -> None:
        """`_after`: `extended`'s, these files' ids follow its."""
        first: int = _after._n_files if _after is not None else 0
        by_word: dict[str, list[int]] = {}
        for f, path in enumerate(files, first):
            for word in path_words(path):
                by_word.setdefault(word, []).append(f)
        merged = dict(zip(_after._words, _after._files, strict=True)) if _after is not None else {}
        for w, ids in by_word.items():
            more = np.asarray(ids, dtype=np.int64)
            merged[w] = np.concatenate([merged[w], more]) if w in merged else more
        self._words: list[str] = sorted(merged)
        self._files: list[np.ndarray] = [merged[w] for w in self._words]
        self._index = {w: i for i, w in enumerate(self._words)}
        self._longest = max(map(len, self._words), default=0)
        self._n_files: int = first + len(files)

    def extended(self, files: Sequence[str]) -> FileWords:
        """These files followed by `files` (ids after these), without reading these again."""
        return FileWords(files, self)

    def _files_of(self, word: str) -> np.ndarray:
        """Files with a path word that begins with `word` or that `word` begins with."""
        start = bisect.bisect_left(self._words, word)
        end = start
        while end < len(self._words) and self._words[end].startswith(word):
            end += 1
        found = list(range(start, end))
        # The path word is a prefix of the query word: no longer than the longest path word, so
        # a hostile query of one long word costs no more than an ordinary one.
        for cut in range(MIN_WORD_LEN, min(len(word), self._longest + 1)):
            i = self._index.get(word[:cut])
            if i is not None:
                found.append(i)
        if not found:
            return np.empty(0, dtype=np.int64)
        return np.unique(np.concatenate([self._files[i] for i in found]))

    def match(self, query: str) -> dict[int, float]:
        """File id -> the weighted share of the query's words its path matches (0 to 1), for
        the files at `MIN_SHARE` or above."""
        words = query_words(query)
        if not words or not self._n_files:
            return {}
        named = [self._files_of(w) for w in words]
        weights = [math.log1p(self._n_files / (1 + len(files))) for files in named]
        total = sum(weights)
        share = np.zeros(self._n_files)
        for files, weight in zip(named, weights, strict=True):
            share[files] += weight / total
        hits = np.flatnonzero(share >= MIN_SHARE)
        return dict(zip(hits.tolist(), share[hits].tolist(), strict=True))
