"""Path priors decided by evidence read from the code (issue 39: "read the code, not the path").

Where a C-family library documents itself decides header against source (a header beside its
own source was scaled 0.5 even where the header is the API's documentation), and whether a file
named as a re-export defines code decides whether it is one.

The count is read from the index's chunks (`documented_declarations`), compared per pair
(`documented_headers`), and reaches the ranking through a real index: a documented header
beside a terse source keeps full weight, a bare header beside a commented source (libuv's
`src/idna.h`) is still scaled down (the `implemented_headers` rule, whose switch turns both off)."""

from __future__ import annotations

import itertools
from pathlib import Path

from search_engine.chunking.chunk import Chunk, content_hash
from search_engine.config import EngineConfig
from search_engine.engine import SearchEngine
from search_engine.models import SearchMode, SearchRequest
from search_engine.ranking.corpus import Corpus
from search_engine.ranking.doc_comments import documented_declarations
from search_engine.ranking.priors import PathPriors, TreeFacts, documented_headers
from search_engine.ranking.rules import ALL_ON, RankingRules

LICENSE = "/* Copyright the authors.\n * Licensed under the MIT licence.\n */\n"

DOCUMENTED_HEADER = LICENSE + (
    "#ifndef TABLE_H_\n#define TABLE_H_\n#include <string>\n\n"
    "// A sorted, immutable map from strings to strings, stored in blocks.\n"
    "class Table {\n public:\n"
    "  // Opens the table stored in `file`; returns null when it is damaged.\n"
    "  static Table* Open(const std::string& file);\n\n"
    "  /** Looks `key` up; true when found, with its value in `*value`. */\n"
    "  bool Get(const std::string& key, std::string* value) const;\n\n"
    "  /// The approximate byte offset in the file where `key` would be stored.\n"
    "  long ApproximateOffsetOf(const std::string& key) const;\n"
    "};\n#endif\n"
)
TERSE_SOURCE = LICENSE + (
    '#include "table.h"\n\n'
    "Table* Table::Open(const std::string& file) {\n  return new Table();\n}\n\n"
    "bool Table::Get(const std::string& key, std::string* value) const {\n  return false;\n}\n\n"
    "long Table::ApproximateOffsetOf(const std::string& key) const {\n  return 0;\n}\n"
)
BARE_HEADER = LICENSE + "#ifndef IDNA_H_\n#define IDNA_H_\n\nlong uv__idna_toascii(const char* s, char* d);\n\n#endif\n"
COMMENTED_SOURCE = LICENSE + (
    '#include "idna.h"\n\n'
    "/* Encodes one label of an internationalized domain name as punycode. */\n"
    "static int uv__idna_encode_label(const char* s, char* d) {\n  return 0;\n}\n\n"
    "// Converts a whole domain name to ASCII, label by label.\n"
    "long uv__idna_toascii(const char* s, char* d) {\n  return uv__idna_encode_label(s, d);\n}\n"
)


def chunks_of(text: str, cuts: tuple[int, ...] = ()) -> list[Chunk]:
    """`text` as chunks starting at the 1-based lines `cuts` (besides line 1), as the index
    stores a file."""
    lines = text.splitlines(keepends=True)
    starts = [1, *cuts, len(lines) + 1]
    return [
        Chunk("f.h", "cpp", a, b - 1, 0, 0, "".join(lines[a - 1 : b - 1]), "window", None, content_hash(text))
        for a, b in itertools.pairwise(starts)
    ]


def test_declarations_under_a_comment_are_counted_but_not_the_banner_or_includes() -> None:
    assert documented_declarations(chunks_of(DOCUMENTED_HEADER)) == 4
    assert documented_declarations(chunks_of(TERSE_SOURCE)) == 0
    assert documented_declarations(chunks_of(BARE_HEADER)) == 0
    assert documented_declarations(chunks_of(COMMENTED_SOURCE)) == 2
    # However the file was cut into chunks, the count is the file's.
    assert documented_declarations(chunks_of(DOCUMENTED_HEADER, (5, 9, 14))) == 4
    # A blank line between a comment and the code detaches it.
    assert documented_declarations(chunks_of(LICENSE + "int a;\n// loose\n\nint b;\n")) == 0


def test_a_header_is_documented_only_when_it_explains_more_than_its_source() -> None:
    counts = {"t/table.h": 4, "t/table.cc": 0, "src/idna.h": 0, "src/idna.c": 2, "a/eq.h": 3, "a/eq.c": 3}
    implemented = {"t/table.h": "t/table.cc", "src/idna.h": "src/idna.c", "a/eq.h": "a/eq.c"}
    assert documented_headers(implemented, counts.__getitem__) == {"t/table.h"}
    paths = sorted(counts)
    tree = TreeFacts.of(paths, counts.__getitem__)
    assert tree.implemented == set(implemented) and tree.documented == {"t/table.h"}
    languages = ["c" if p.endswith((".c", ".h")) else "cpp" for p in paths]
    factors = dict(zip(paths, PathPriors().factors(paths, languages, tree), strict=True))
    assert factors["t/table.h"] == factors["t/table.cc"] == 1.0
    assert factors["src/idna.h"] < 1.0 and factors["a/eq.h"] < 1.0
    off = PathPriors.for_query("x", rules=RankingRules().without("implemented_headers"))
    assert set(off.factors(paths, languages, tree)) == {1.0}


def test_a_real_index_reads_where_the_docs_live(tmp_path: Path, model_cache: Path) -> None:
    root = tmp_path / "repo"
    files = {
        "db/table.h": DOCUMENTED_HEADER,
        "db/table.cc": TERSE_SOURCE,
        "src/idna.h": BARE_HEADER,
        "src/idna.c": COMMENTED_SOURCE,
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)

    def factors(rules: RankingRules) -> dict[str, float]:
        engine = SearchEngine(EngineConfig(cache_dir=model_cache, watch=False, ranking=rules))
        request = SearchRequest(mode=SearchMode.HYBRID, query="look a key up in the sorted table", root=str(root))
        scores = {m.path: m.score for m in engine.search(request).matches}
        assert set(scores) >= {"db/table.h", "db/table.cc"}
        index = engine.indexes.get(Path(root))
        corpus = Corpus.build(index.chunks, index.vectors, index.lexical)  # as the ranking builds it
        return dict(zip(corpus.files, corpus.priors_for(request.query, rules).tolist(), strict=True))

    on = factors(ALL_ON)
    assert on["db/table.h"] == on["db/table.cc"] == 1.0
    assert on["src/idna.h"] < on["src/idna.c"] == 1.0
    assert factors(RankingRules().without("implemented_headers"))["src/idna.h"] == 1.0


def test_a_real_index_reads_which_re_export_files_define_code(tmp_path: Path, model_cache: Path) -> None:
    """The corpus asks the index's chunks whether a file named as a re-export defines anything."""
    root = tmp_path / "repo"
    files = {
        "spy/index.ts": "export function spyOn(obj: object, method: string) {\n  return wrap(obj, method)\n}\n",
        "ui/index.ts": "export * from './dark'\nexport * from './tree'\n",
        "ui/dark.ts": "export function isDark(): boolean {\n  return true\n}\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    engine = SearchEngine(EngineConfig(cache_dir=model_cache, watch=False))
    engine.search(SearchRequest(mode=SearchMode.HYBRID, query="spy on a method", root=str(root)))
    index = engine.indexes.get(Path(root))
    corpus = Corpus.build(index.chunks, index.vectors, index.lexical)
    assert corpus.tree.defining == {"spy/index.ts"}
