"""Symbol matching over real chunks: exact spelling first, then case/underscore variants, then
fuzzy near-misses; prose never counts as a definition."""

from __future__ import annotations

import pytest

from search_engine.chunking.chunk import Chunk
from search_engine.chunking.chunker import chunk_file
from search_engine.files.languages import language_for
from search_engine.ranking.symbols import SymbolIndex, query_identifiers

SOURCES = {
    "net/client.py": "class ClientSession:\n    def close(self):\n        pass\n",
    "net/connector.py": "class TCPConnector:\n    limit = 100\n",
    "net/helpers.py": "def client_session(url):\n    return url\n",
    "README.md": "# Usage\n\nClientSession = make()\nclass Banner:\n",
}


def _chunked(sources: dict[str, str]) -> list[Chunk]:
    return [c for path, text in sources.items() for c in chunk_file(path, text.encode(), language_for(path))]


@pytest.fixture(scope="module")
def chunks() -> list[Chunk]:
    return _chunked(SOURCES)


@pytest.fixture(scope="module")
def symbols(chunks: list[Chunk]) -> SymbolIndex:
    return SymbolIndex.build(chunks)


def _paths(chunks: list[Chunk], scores: dict[int, float]) -> list[str]:
    return [chunks[i].path for i, _ in sorted(scores.items(), key=lambda kv: -kv[1])]


def test_exact_spelling_wins_over_variants(chunks: list[Chunk], symbols: SymbolIndex) -> None:
    assert _paths(chunks, symbols.match("ClientSession")) == ["net/client.py"]
    assert _paths(chunks, symbols.match("client_session")) == ["net/helpers.py"]


def test_snake_case_query_finds_the_pascal_case_class_when_no_exact_exists(
    chunks: list[Chunk], symbols: SymbolIndex
) -> None:
    assert _paths(chunks, symbols.match("tcp_connector")) == ["net/connector.py"]


def test_typo_finds_the_near_miss(chunks: list[Chunk], symbols: SymbolIndex) -> None:
    assert _paths(chunks, symbols.match("TCPConector")) == ["net/connector.py"]


def test_qualified_name_matches_the_method(chunks: list[Chunk], symbols: SymbolIndex) -> None:
    assert _paths(chunks, symbols.match("ClientSession.close")) == ["net/client.py"]


def test_markdown_samples_are_not_definitions(chunks: list[Chunk], symbols: SymbolIndex) -> None:
    assert symbols.match("Banner") == {}
    assert all(chunks[i].path != "README.md" for i in symbols.match("ClientSession"))


def test_identifiers_embedded_in_prose_are_found_but_plain_words_are_not() -> None:
    ids = query_identifiers("how does ClientSession call read_chunk when the session closes")
    assert ids.names == ("ClientSession", "read_chunk") and not ids.whole
    assert query_identifiers("TCPConnector").whole
    assert query_identifiers("how sessions close").names == ()


# Definitions against declarations, re-exports and trait impls of the same name,
# across languages: the definition is what a bare identifier asks for.
DEFINITION_SOURCES = {
    "serde_core/src/ser/mod.rs": "pub trait Serialize {\n    fn serialize(&self);\n}\n",
    "serde_core/src/ser/impls.rs": "impl Serialize for bool {\n    fn serialize(&self) {}\n}\n",
    "include/fmt/std.h": "template <typename Char>\nstruct formatter<std::string, Char> {\n  int x;\n};\n",
    "include/fmt/base.h": "template <typename T, typename Char>\nstruct formatter {\n  int y;\n};\n",
    "lib/sinatra/base.rb": "module Sinatra\n  class Base\n    def call(env)\n    end\n  end\nend\n",
    "src/app.ts": "export const appRouter = router({ greeting: procedure });\n",
    "src/http.js": "const $http = createClient();\n",
    "tests/ui/bad.stderr": "error: struct Serialize is not allowed here\n",
    "priv/templates/router.ex.eex": "defmodule Serialize do\nend\n",
}


@pytest.fixture(scope="module")
def definition_chunks() -> list[Chunk]:
    return _chunked(DEFINITION_SOURCES)


def _best(chunks: list[Chunk], scores: dict[int, float]) -> str:
    assert scores, "nothing matched"
    return chunks[max(scores, key=lambda i: (scores[i], -i))].path


def test_a_trait_beats_its_impls_and_generated_or_template_mentions(definition_chunks: list[Chunk]) -> None:
    scores = SymbolIndex.build(definition_chunks).match("Serialize")
    assert [definition_chunks[i].path for i in scores] == ["serde_core/src/ser/mod.rs"]


@pytest.mark.parametrize(
    ("query", "path"),
    [
        ("Sinatra::Base", "lib/sinatra/base.rb"),
        ("appRouter", "src/app.ts"),
        ("app_router", "src/app.ts"),
        ("$http", "src/http.js"),
        ("http", "src/http.js"),
    ],
)
def test_qualified_sigilled_and_factory_made_names_are_found(
    definition_chunks: list[Chunk], query: str, path: str
) -> None:
    assert query_identifiers(query).whole
    assert _best(definition_chunks, SymbolIndex.build(definition_chunks).match(query)) == path


def test_a_qualified_query_prefers_the_definition_under_that_qualifier() -> None:
    sources = {
        "lib/sinatra/base.rb": "module Sinatra\n  module Helpers\n    def status(value)\n    end\n  end\nend\n",
        "contrib/lib/sinatra/respond_with.rb": "module Sinatra\n  module RespondWith\n    module Helpers\n"
        "      def respond_with(obj)\n      end\n    end\n  end\nend\n",
    }
    chunks = _chunked(sources)
    big = "\n".join(f"    def helper_{i}(value)\n      value + {i}\n    end" for i in range(60))
    chunks += chunk_file(
        "lib/sinatra/more.rb", f"module Sinatra\n  module Helpers\n{big}\n  end\nend\n".encode(), "ruby"
    )
    scores = SymbolIndex.build(chunks).match("Sinatra::Helpers")
    qualified = {chunks[i].path for i, s in scores.items() if s == max(scores.values())}
    assert "contrib/lib/sinatra/respond_with.rb" not in qualified
    assert "contrib/lib/sinatra/respond_with.rb" in {chunks[i].path for i in scores}


def test_a_name_many_files_define_counts_less_inside_a_sentence_than_asked_alone() -> None:
    """commons-lang: "toString builder for ..." lifted every class's `toString` over
    `ToStringBuilder`. Inside a sentence a name five files define is weak evidence; asked for
    alone (`to_s`) it is still matched at full weight."""
    sources = {
        f"lib/shapes/{name.lower()}.rb": f'class {name}\n  def to_s\n    "{name}"\n  end\nend\n'
        for name in ("Pair", "Triple", "Range", "Fraction", "DiffResult")
    }
    sources["lib/shapes/inspect.rb"] = "module Inspect\n  def to_str(value)\n    value.inspect\n  end\nend\n"
    chunks = _chunked(sources)
    symbols = SymbolIndex.build(chunks)
    in_sentence = symbols.match("to_s builder for human-readable object descriptions")
    alone = symbols.match("to_s")
    assert set(_paths(chunks, in_sentence)) == {p for p in sources if "inspect" not in p}
    assert set(_paths(chunks, alone)) == {p for p in sources if "inspect" not in p}
    assert max(in_sentence.values()) <= 0.6 * max(alone.values())
    # A name few files define keeps its weight inside a sentence.
    few = SymbolIndex.build(_chunked({"lib/shapes/pair.rb": sources["lib/shapes/pair.rb"]}))
    assert max(few.match("to_s builder for objects").values()) == max(few.match("to_s").values())
