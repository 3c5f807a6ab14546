"""Code-aware tokenization: identifiers whole and split, stems, path tokens, query stopwords."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from search_engine.errors import InvalidQueryError
from search_engine.ranking.code_tokens import (
    MAX_QUERY_CHARS,
    MIN_TOKEN_LEN,
    path_tokens,
    query_terms,
    split_identifier,
    tokenize_text,
    validate_query,
)


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("ClientSession", ("clientsession", "client", "session")),
        ("read_chunk_size", ("readchunksize", "read", "chunk", "size")),
        ("XMLParser", ("xmlparser", "xml", "parser")),
        ("getHTTPResponse", ("gethttpresponse", "get", "http", "respons")),
        ("http2", ("http2", "http")),
        ("parsing", ("pars",)),
        ("__init__", ("init",)),
    ],
)
def test_identifier_is_kept_whole_and_split_into_stemmed_parts(word: str, expected: tuple[str, ...]) -> None:
    assert split_identifier(word) == expected


def test_naming_conventions_share_the_whole_token() -> None:
    wholes = {split_identifier(w)[0] for w in ("ReadChunkSize", "read_chunk_size", "readChunkSize", "READ_CHUNK_SIZE")}
    assert wholes == {"readchunksize"}


def test_single_characters_and_digits_are_not_tokens() -> None:
    assert tokenize_text("x = y[0] + 42 * i") == []


def test_inflections_meet_at_the_stem() -> None:
    assert tokenize_text("parsed") == tokenize_text("parsing") == ["pars"]
    assert tokenize_text("quantize") == tokenize_text("quantization")


def test_non_ascii_identifiers_are_not_cut_by_ascii_case_rules() -> None:
    assert split_identifier("größe_berechnen")[0] == "größeberechnen"
    assert "größ" in " ".join(split_identifier("größe_berechnen"))


def test_path_tokens_name_the_stem_and_nearby_directories_not_the_extension() -> None:
    tokens = path_tokens("src/aiohttp/web_urldispatcher.py")
    assert tokens[:2] == ["src", "aiohttp"]
    assert {"weburldispatcher", "web", "urldispatch"} <= set(tokens)
    assert "py" not in tokens
    assert "deep" not in path_tokens("deep/er/still/mod.py")  # only the last two directories


def test_query_terms_drop_free_standing_stopwords_only() -> None:
    assert query_terms("how is the retry logic handled") == ["retri", "logic", "handl"]
    assert "is" in query_terms("is_valid")  # inside an identifier nothing is dropped


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_empty_query_is_refused_with_a_hint(query: str) -> None:
    with pytest.raises(InvalidQueryError, match="empty"):
        validate_query(query)


@pytest.mark.parametrize("query", ["how is the", "what does it do?", "?!"])
def test_query_of_only_stopwords_or_punctuation_is_refused(query: str) -> None:
    with pytest.raises(InvalidQueryError, match="only stopwords"):
        validate_query(query)


def test_valid_query_returns_its_terms() -> None:
    assert validate_query("ClientSession") == ["clientsession", "client", "session"]


@given(st.text(max_size=200))
def test_tokens_are_lowercase_and_long_enough_for_any_text(text: str) -> None:
    for token in tokenize_text(text):
        assert token == token.lower()
        assert len(token) >= MIN_TOKEN_LEN - 1  # a stem may be one shorter than its word


def test_a_word_code_abbreviates_brings_its_abbreviation_along() -> None:
    """Code says `impls.rs`, `cb` and `cfg` where a question says "implementations", "callbacks"
    and "configuration"; each abbreviation is added once, after the query's own terms."""
    assert query_terms("standard library Serialize implementations") == [
        "standard",
        "librari",
        "serial",
        "implement",
        "impl",
    ]
    assert query_terms("idle callbacks and the callback queue") == ["idl", "callback", "callback", "queue", "cb"]
    assert query_terms("endpoint configuration") == ["endpoint", "configur", "config", "cfg"]
    # the term a file named by the abbreviation (`impls.rs`) is indexed under is among them
    assert set(tokenize_text("impls")) <= set(query_terms("Serialize implementations"))


def test_keywords_and_everyday_names_are_not_added_as_abbreviations() -> None:
    for query, absent in (("function arguments", {"fn", "func", "arg"}), ("asynchronous request", {"async", "req"})):
        assert not absent & set(query_terms(query))


def test_a_query_over_the_length_limit_is_refused_before_any_work() -> None:
    """A semantic or hybrid query describes code; a hostile megabyte of words would cost every
    step of the search, so it is refused with the limit and what to do instead."""
    assert validate_query("retry " * (MAX_QUERY_CHARS // 6))  # at the limit: searched
    with pytest.raises(InvalidQueryError, match=r"over the 10,000 .*regex_search"):
        validate_query("retry " * (MAX_QUERY_CHARS // 6 + 1))
