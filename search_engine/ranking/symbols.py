"""Exact and fuzzy matching of the identifiers a query names against where they are defined.

When an agent types `ClientSession` it wants `class ClientSession`, not the hundred places
that use it; BM25 ranks by how often a name occurs and embeddings by what a chunk is about, so
neither reliably puts the definition first. This index maps every defined name to the chunks
that define it. Names are compared normalized (lowercase, underscores removed), so
`client_session` finds `ClientSession`; a near miss (`ClientSesion`, `TCPConector`) goes
through rapidfuzz over the (small) vocabulary of defined names.

Definitions come from the chunker's `symbol` (tree-sitter knows them in every language it
parses) and from definition lines in the chunk text, which also covers chunks that merge
several small definitions and line-window chunks of files that failed to parse.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from rapidfuzz import fuzz, process

from search_engine.chunking.chunk import Chunk
from search_engine.files.languages import FileKind, file_kind
from search_engine.ranking.rules import ALL_ON, RankingRules

# `def name`, `class Name`, `func (r *T) Name`, `pub fn name`, `export default function name`,
# `interface Name`, ... at the start of a line: the common shapes of a definition across the
# languages we chunk. Column-0 assignments (`Name = ...`, `Name: T = ...`) define module-level
# names (type aliases, singletons) and count too.
_DEFINITION_RE = re.compile(
    r"^[ \t]*(?:(?:export|default|pub(?:\([^)]*\))?"
    r"|public|private|protected|static|abstract|final|async|unsafe|const)\s+)*"
    r"(?:def|defp|defmacro|defmodule|class|func|fn|function|struct|enum|trait|interface|type|module|record"
    r"|object|protocol|typedef)\s+"
    r"(?:\([^)]*\)\s*)?([$]?[^\W\d][\w$]*(?:(?:::|\.)[^\W\d]\w*)*)",
    re.MULTILINE,
)
# `Name = ...` at column 0, and a top-level `export const name = factory(...)` / `val x = ...`:
# a binding is how factory-made things (routers, stores, clients) are defined.
_ASSIGNMENT_RE = re.compile(
    r"^(?:(?:export\s+)?(?:const|let|var|val)\s+)?([$@]?[^\W\d][\w$]*)\s*(?::[^=\n]+)?=(?![=>])", re.MULTILINE
)

# A query that is one identifier, possibly qualified (`ClientSession`, `field_validator`,
# `web.Application`, `Foo::bar`, `Sinatra::Base`) and possibly sigilled (`$http`, `@app`).
_SYMBOL_QUERY_RE = re.compile(r"^[$@]?[^\W\d][\w$]*(?:(?:\.|::|->|#)[^\W\d][\w$]*)*$")
# An identifier embedded in prose that is shaped like code: has an inner capital or an underscore
# (`StaticModel`, `model_post_init`). Plain words ("model") are left to BM25 and embeddings.
_CODE_WORD_RE = re.compile(r"\b(?:[A-Za-z]+[a-z0-9][A-Z]\w*|[A-Z]{2,}[a-z]\w*|[A-Za-z]\w*_\w+)\b")
_QUALIFIER_RE = re.compile(r"\.|::|->|#")

# Scores of the tiers of match (see `SymbolIndex.match`); a fuzzy match is also scaled by its
# rapidfuzz ratio, and kept below a file named after the symbol (see `search_engine.ranking.hybrid`).
EXACT = 1.0
NORMALIZED = 0.9
FUZZY_WEIGHT = 0.3
FUZZY_CUTOFF = 85.0  # rapidfuzz ratio (0-100) below which a name is not considered a match
MIN_FUZZY_LEN = 5  # shorter names match too many others at any cutoff
# Every definition is equal evidence: weighing assignments and C++ template specializations 0.8
# helped no dev repository and cost fmtlib 0.018 (issue 39's standard). The index still stores a
# factor per definition (`ChunkTable.definitions`), now always 1.0 and unread.
# A qualified query's last part alone (`Helpers` for `Sinatra::Helpers`) matches more loosely
# than the whole qualified name.
TAIL_FACTOR = 0.9
# An identifier inside a sentence ("toString builder for ...") that more than this many files
# define (`toString`, `new`, `run`) says little about which of them the question is about: its
# definitions are scaled by SPREAD / (files defining it). A whole-query identifier is what was
# asked for and keeps full weight however often it is defined.
SPREAD = 3


def normalize(name: str) -> str:
    """Comparison key of an identifier: lowercase, no underscores, no `$`/`@` sigil
    (`client_session` == `ClientSession`, `$http` == `http`)."""
    return name.replace("_", "").lstrip("$@").lower()


@dataclass(frozen=True, slots=True)
class QueryIdentifiers:
    """The identifiers a query names. `whole` is true when the entire query is one (possibly
    qualified) identifier: then fuzzy matching is worth its cost and the symbol signal leads."""

    names: tuple[str, ...]
    whole: bool


def query_identifiers(query: str) -> QueryIdentifiers:
    text = query.strip()
    if _SYMBOL_QUERY_RE.match(text):
        return QueryIdentifiers((text,), True)
    return QueryIdentifiers(tuple(dict.fromkeys(_CODE_WORD_RE.findall(text))), False)


@dataclass(frozen=True, slots=True)
class _Definition:
    chunk: int
    path: str  # the defining chunk's file
    name: str  # as written in the code
    factor: float  # 1.0 for a def/class line or chunk symbol, ASSIGNMENT_FACTOR for `x = ...`


class Symbols(Protocol):
    """What ranking asks of defined names: one generation's (`SymbolIndex`) or a generation's
    beside the live files' (`JoinedSymbols`)."""

    def match(self, query: str, rules: RankingRules = ALL_ON) -> dict[int, float]: ...


class JoinedSymbols:
    """A generation's definitions (`base`) and the live files' (`live`, chunk ids after the
    base's `offset`). Each side is matched on its own, so a name's tiers (exact spelling
    first) and its spread over files are judged per side, not over both: near what one index
    of both would say, not always equal."""

    def __init__(self, base: Symbols, live: SymbolIndex, offset: int) -> None:
        self.base, self.live, self.offset = base, live, offset

    def match(self, query: str, rules: RankingRules = ALL_ON) -> dict[int, float]:
        scores = dict(self.base.match(query, rules))
        scores.update({i + self.offset: v for i, v in self.live.match(query, rules).items()})
        return scores


class SymbolIndex:
    """Defined names -> defining chunks, for one list of chunks (indices into it).

    Built from every definition of an index when its first search needs it (600k at 450k
    chunks), so building does the least per definition and keeps columns, not objects: each
    distinct name is normalized once, the definitions are sorted by key, and a key maps to
    its range of rows. The `_Definition`s of a key (with their stem match) are made only
    when a query looks it up."""

    def __init__(self, chunks: np.ndarray, paths: Sequence[str], names: Sequence[str], factors: np.ndarray) -> None:
        """Definition columns: row r is chunk `chunks[r]` (in file `paths[r]`) defining
        `names[r]` with evidence `factors[r]`."""
        key_ids: dict[str, int] = {}
        of_name: dict[str, int] = {}
        row_keys = np.empty(len(names), dtype=np.int32)
        for r, name in enumerate(names):
            k = of_name.get(name)
            if k is None:
                k = of_name[name] = key_ids.setdefault(normalize(name), len(key_ids))
            row_keys[r] = k
        self._order = np.argsort(row_keys, kind="stable").astype(np.int32)
        self._bounds = np.searchsorted(row_keys[self._order], np.arange(len(key_ids) + 1)).tolist()
        self._key_ids = key_ids
        self._keys = list(key_ids)
        self._chunks, self._paths, self._names, self._factors = chunks, paths, names, factors

    @classmethod
    def build(cls, chunks: Sequence[Chunk]) -> SymbolIndex:
        return cls.from_definitions(
            (i, chunk.path, name, factor)
            for i, chunk in enumerate(chunks)
            for name, factor in defined_names(chunk).items()
        )

    @classmethod
    def from_definitions(cls, definitions: Iterable[tuple[int, str, str, float]]) -> SymbolIndex:
        """From (chunk id, chunk path, name, factor) as `defined_names` gives them."""
        rows = list(definitions)
        return cls(np.array([r[0] for r in rows], dtype=np.int64), [r[1] for r in rows], [r[2] for r in rows],
                   np.array([r[3] for r in rows], dtype=np.float64))  # fmt: skip

    def _definitions(self, key: str) -> list[_Definition]:
        k = self._key_ids.get(key)
        if k is None:
            return []
        return [
            _Definition(int(self._chunks[r]), self._paths[r], self._names[r], float(self._factors[r]))
            for r in self._order[self._bounds[k] : self._bounds[k + 1]].tolist()
        ]

    def match(self, query: str, rules: RankingRules = ALL_ON) -> dict[int, float]:
        """Chunks defining an identifier the query names, with a match score in (0, 1].

        Matching is tiered per identifier: definitions spelled exactly as asked win; only when
        there are none do case/underscore variants count, and only when there are none of
        those either (and the whole query is the identifier) do fuzzy near-misses. So
        `Tokenizer` does not pull in every `tokenizer` attribute when a class exists, yet
        `client_session` still finds `ClientSession` and `TCPConector` finds `TCPConnector`.
        Empty when the query names no identifier or none is defined here. `rules`: which
        ranking rules are on (`search_engine.ranking.rules`)."""
        ids = query_identifiers(query)
        scores: dict[int, float] = {}
        for name in ids.names:
            candidates = _candidates(name)
            for n, candidate in enumerate(candidates if rules.qualified_tail else candidates[:1]):
                # `Sinatra::Helpers` is `Sinatra.Helpers` before it is any other `Helpers`.
                weight = 1.0 if n == 0 else TAIL_FACTOR
                for chunk, score in self._match_name(candidate, ids.whole, rules).items():
                    if score * weight > scores.get(chunk, 0.0):
                        scores[chunk] = score * weight
        return scores

    def _match_name(self, name: str, whole: bool, rules: RankingRules) -> dict[int, float]:
        """Definitions of one name; near misses only for a `whole`-query identifier, and a
        name many files define scaled down only when it is not (see `SPREAD`)."""
        key = normalize(name)
        found = self._definitions(key)
        exact = [d for d in found if d.name == name]
        if exact or found:
            chosen = exact or found
            spread = 1.0 if whole or not rules.symbol_spread else min(1.0, SPREAD / len({d.path for d in chosen}))
            return _scored(chosen, (EXACT if exact else NORMALIZED) * spread)
        if not whole or len(key) < MIN_FUZZY_LEN or not rules.fuzzy_symbols:
            return {}
        scores: dict[int, float] = {}
        for other, ratio, _ in process.extract(key, self._keys, scorer=fuzz.ratio, score_cutoff=FUZZY_CUTOFF, limit=10):
            for chunk, score in _scored(self._definitions(other), FUZZY_WEIGHT * ratio / 100.0).items():
                scores[chunk] = max(score, scores.get(chunk, 0.0))
        return scores


def _scored(definitions: list[_Definition], base: float) -> dict[int, float]:
    """Each defining chunk's score: `base`, every definition being equal evidence. A definition
    in a file named after the symbol (`tokenizer.py` for `Tokenizer`) gained 0.1 once: it
    helped no dev repository and cost nlohmann-json 0.007 (issue 39's standard)."""
    return dict.fromkeys((d.chunk for d in definitions), base)


def _candidates(name: str) -> list[str]:
    """The names to look up for one query identifier: itself and, when qualified
    (`web.Application`), its last part."""
    parts = _QUALIFIER_RE.split(name)
    return [name.replace("::", ".").replace("->", ".").replace("#", "."), parts[-1]] if len(parts) > 1 else [name]


def defined_names(chunk: Chunk) -> dict[str, float]:
    """Names a chunk defines, each with its evidence factor. Only code defines names: a
    README's code sample, a config file, a template or a generated compiler-output expectation
    shows how names are used, not where they are defined."""
    names: dict[str, float] = {}
    if file_kind(chunk.path, chunk.language) is not FileKind.CODE:
        return names
    content = chunk.content
    for name in _ASSIGNMENT_RE.findall(content):
        names[name] = 1.0
    for m in _DEFINITION_RE.finditer(content):
        _add_qualified(names, m.group(1).replace("::", "."), 1.0)
    if chunk.symbol:
        _add_qualified(names, chunk.symbol, 1.0)
    return names


def _add_qualified(names: dict[str, float], name: str, factor: float) -> None:
    """A definition's name as written (dotted) and its last part (`Sinatra.Base`, `Base`;
    `self.build` defines `build`), keeping the strongest evidence seen for each."""
    for key in (name, name.rsplit(".", 1)[-1]):
        names[key] = max(factor, names.get(key, 0.0))
