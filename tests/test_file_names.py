"""Which files a query names (`search_engine.ranking.corpus.FileNames`): exact spellings first, rapidfuzz
near misses of stems and partial paths only when nothing is named exactly, extensions
respected, and nothing at all for a query that is not one path-like token."""

from __future__ import annotations

import pytest

from search_engine.ranking.corpus import FileNames

FILES = [
    "aiohttp/web_urldispatcher.py",
    "aiohttp/helpers.py",
    "aiohttp/_websocket/helpers.py",
    "docs/helpers.md",
    "aiohttp/client/session.py",
    "aiohttp/client/connection.py",
    "model2vec/tokenizer/tokenizer.py",
    "model2vec/tokenize.py",
    "fastapi/dependencies/utils.py",
    "fastapi/openapi/utils.py",
    "fastapi/security/oauth2.py",
    "src/data-loader.ts",
]


@pytest.fixture(scope="module")
def names() -> FileNames:
    return FileNames(FILES)


def _named(names: FileNames, query: str) -> dict[str, float]:
    return {FILES[f]: round(s, 2) for f, s in names.match(query).scores.items()}


@pytest.mark.parametrize(
    ("query", "path"),
    [
        ("web_urldispatcer", "aiohttp/web_urldispatcher.py"),  # typo
        ("urldispatcher", "aiohttp/web_urldispatcher.py"),  # missing word
        ("WebUrlDispatcher", "aiohttp/web_urldispatcher.py"),  # another naming convention
        ("client/sesion", "aiohttp/client/session.py"),  # partial path, typo
        ("dependencies/utls", "fastapi/dependencies/utils.py"),  # the directory decides
        ("security/oauth", "fastapi/security/oauth2.py"),
        ("./aiohttp/client/session.py", "aiohttp/client/session.py"),
        ("data_loader", "src/data-loader.ts"),  # kebab-case file, snake-case query
    ],
)
def test_a_near_miss_names_the_file(names: FileNames, query: str, path: str) -> None:
    assert max(_named(names, query).items(), key=lambda kv: kv[1])[0] == path


def test_exact_names_win_and_fuzzy_ones_are_then_not_looked_for(names: FileNames) -> None:
    # `tokenize.py` is one letter away from `tokenizer`, but a file is named exactly.
    assert _named(names, "Tokenizer") == {"model2vec/tokenizer/tokenizer.py": 1.0}
    assert _named(names, "tokenizers") == {"model2vec/tokenizer/tokenizer.py": 1.0}  # plural
    assert _named(names, "helpers") == {
        "aiohttp/helpers.py": 1.0,
        "aiohttp/_websocket/helpers.py": 1.0,
        "docs/helpers.md": 1.0,
    }


def test_an_extension_must_match_and_makes_the_query_explicit(names: FileNames) -> None:
    named = names.match("hlpers.py")
    assert named.explicit
    assert {FILES[f] for f in named.scores} == {"aiohttp/helpers.py", "aiohttp/_websocket/helpers.py"}
    assert set(_named(names, "helpers.md")) == {"docs/helpers.md"}
    assert names.match("client/sesion").explicit
    assert not names.match("web_urldispatcer").explicit  # an identifier may name a file, or not


@pytest.mark.parametrize(
    "query",
    [
        "where are url routes dispatched",  # natural language: never a path
        "helpers for sessions",
        "utls",  # too short for a near miss to mean anything
        "ClientSession.close",  # a qualified name, not a file with extension `.close`
        "connectivity",  # shares letters with connection, not its name
        "42",
    ],
)
def test_queries_that_name_no_file(names: FileNames, query: str) -> None:
    assert names.match(query).scores == {}
