"""Symbol matching over real chunks: exact spelling first, then case/underscore variants, then
fuzzy near-misses; prose never counts as a definition."""

from __future__ import annotations

import pytest

from search_engine.chunking import chunk_file
from search_engine.chunks import Chunk
from search_engine.languages import language_for
from search_engine.symbols import SymbolIndex, query_identifiers

SOURCES = {
    "net/client.py": "class ClientSession:\n    def close(self):\n        pass\n",
    "net/connector.py": "class TCPConnector:\n    limit = 100\n",
    "net/helpers.py": "def client_session(url):\n    return url\n",
    "README.md": "# Usage\n\nClientSession = make()\nclass Banner:\n",
}


@pytest.fixture(scope="module")
def chunks() -> list[Chunk]:
    out: list[Chunk] = []
    for path, text in SOURCES.items():
        out.extend(chunk_file(path, text.encode(), language_for(path)))
    return out


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
