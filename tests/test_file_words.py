"""Which files a question's words name: the words of each file's stem and folder, matched by
prefix either way and weighted by how few files each word names."""

from __future__ import annotations

import pytest

from search_engine.ranking.file_words import MIN_SHARE, FileWords, path_words, query_words

FILES = [
    "lib/sinatra/base.rb",
    "lib/sinatra/show_exceptions.rb",
    "lib/sinatra/indifferent_hash.rb",
    "serde_derive/src/internals/attr.rs",
    "include/fmt/format.h",
    "include/fmt/ostream.h",
]


def test_path_words_are_the_stem_and_folder_pieces() -> None:
    assert path_words("lib/sinatra/show_exceptions.rb") == {"show", "exceptions", "sinatra"}
    assert path_words("packages/server/src/adapters/nodeHTTPRequestHandler.ts") == {
        "node",
        "http",
        "request",
        "handler",
        "adapters",
    }
    assert path_words("a/io.c") == set()  # too short to compare


def test_query_words_drop_stopwords_and_short_words() -> None:
    assert query_words("how are the exceptions of an io call rendered, and exceptions again") == [
        "exceptions",
        "call",
        "rendered",
        "again",
    ]


@pytest.mark.parametrize(
    ("query", "path"),
    [
        ("exception rendering and stack traces", "lib/sinatra/show_exceptions.rb"),  # query word is the prefix
        ("how derive macros apply field-level attributes", "serde_derive/src/internals/attr.rs"),  # path word is
        ("formatter", "include/fmt/format.h"),
        ("case-insensitive hash for request params", "lib/sinatra/indifferent_hash.rb"),
    ],
)
def test_a_query_word_names_the_file_that_shares_it(query: str, path: str) -> None:
    scores = FileWords(FILES).match(query)
    assert max(scores, key=lambda f: scores[f]) == FILES.index(path)


def test_a_word_every_path_has_weighs_less_than_a_rare_one() -> None:
    words = FileWords(FILES)
    scores = words.match("sinatra exceptions")  # `sinatra` is in three paths, `exceptions` in one
    shown, base = FILES.index("lib/sinatra/show_exceptions.rb"), FILES.index("lib/sinatra/base.rb")
    assert scores[shown] == pytest.approx(1.0)
    assert MIN_SHARE <= scores[base] < 0.5


def test_no_shared_word_and_tiny_shares_name_nothing() -> None:
    assert FileWords(FILES).match("vectorized matrix multiplication") == {}
    assert FileWords(FILES).match("how") == {}
    assert FileWords([]).match("format") == {}
    many = " ".join(f"word{i}x" for i in range(30))  # one shared word among thirty: under MIN_SHARE
    assert FileWords(FILES).match(f"format {many}") == {}


def test_a_query_word_longer_than_any_path_word_still_matches_by_prefix() -> None:
    """The path-word-is-a-prefix check stops at the longest path word, so a word of thousands of
    letters costs no more than a short one, and still finds the file it begins with."""
    scores = FileWords(FILES).match("format" + "x" * 5000)
    assert max(scores, key=lambda f: scores[f]) == FILES.index("include/fmt/format.h")
