"""Every grammar beyond the first nine: definitions named, doc comments and attributes kept with
what they document, and the definition found by symbol matching, on small snippets written
the way the language's real projects write them (`tests/grammar_samples/`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from search_engine.chunking.chunk import Chunk
from search_engine.chunking.chunker import chunk_file
from search_engine.chunking.grammars import SPECS, parser_for
from search_engine.files.languages import language_for
from search_engine.ranking.symbols import SymbolIndex
from tests.index_helpers import assert_well_formed

SAMPLES = Path(__file__).parent / "grammar_samples"

# file -> (language, the (kind, symbol) pairs it must yield, a chunk that must start with its
# doc comment or attribute: (symbol, first words), a query naming a definition)
CASES = {
    "Widget.cs": ("csharp", [("namespace", "Demo.Widgets")], ("Demo.Widgets", "namespace"), "Widget"),
    "base.rb": (
        "ruby",
        [("class", "Sinatra.Base"), ("method", "Sinatra.Base.mime_type")],
        ("Sinatra.Base.mime_type", "# Lookup or register"),
        "Sinatra::Base",
    ),
    "Router.php": ("php", [("class", "Router"), ("function", "route_url")], ("Router", "/**"), "route_url"),
    "Cache.kt": ("kotlin", [("class", "Cache"), ("class", "Caches")], ("Cache", "/** An in-memory"), "Caches"),
    "Store.swift": ("swift", [("class", "Store"), ("class", "Persisting")], ("Store", "/// A key-value"), "Store"),
    "Parser.scala": ("scala", [("class", "ConfigParser")], ("ConfigParser", "/** Parses"), "ConfigParser"),
    "router.ex": (
        "elixir",
        [("function", "Phoenix.Router.scope"), ("function", "Phoenix.Router.match")],
        ("Phoenix.Router.scope", "@doc"),
        "Phoenix.Router",
    ),
    "util.lua": ("lua", [("function", "M.split"), ("function", "trim")], ("M.split", "--- Splits"), "trim"),
    "build.sh": ("shell", [("function", "build_release")], ("build_release", "# Builds"), "build_release"),
    "Queue.hs": ("haskell", [("class", "Queue"), ("function", "push")], ("push", "-- | Adds"), "push"),
    "list.zig": ("zig", [("function", "sum")], ("sum", "/// Returns"), "sum"),
    "stack.ml": ("ocaml", [("class", "stack"), ("function", "push")], ("push", "(** Pushes"), "push"),
    "geom.jl": ("julia", [("function", "area"), ("class", "Circle")], ("area", '"""'), "Circle"),
}


def _chunks(name: str) -> list[Chunk]:
    path = SAMPLES / name
    return chunk_file(name, path.read_bytes(), language_for(name))


def test_at_least_twenty_languages_have_a_grammar_that_loads() -> None:
    assert len(SPECS) >= 20
    for spec in SPECS.values():
        assert parser_for(spec).parse(b"x").root_node is not None


@pytest.mark.parametrize("name", sorted(CASES))
def test_definitions_are_named_and_keep_their_docs(name: str) -> None:
    language, expected, (doc_symbol, doc_start), _ = CASES[name]
    assert language_for(name) == language
    chunks = _chunks(name)
    pairs = [(c.kind, c.symbol) for c in chunks]
    for pair in expected:
        assert pair in pairs, f"{pair} not in {pairs}"
    documented = next(c for c in chunks if c.symbol == doc_symbol)
    assert documented.content.lstrip().startswith(doc_start), documented.content[:80]
    assert_well_formed((SAMPLES / name).read_bytes(), chunks)


@pytest.mark.parametrize("name", sorted(CASES))
def test_symbol_matching_finds_the_definition(name: str) -> None:
    *_, query = CASES[name]
    chunks = _chunks(name)
    matched = SymbolIndex.build(chunks).match(query)
    assert matched, f"{query!r} matched nothing in {name}"
    best = max(matched, key=matched.__getitem__)
    last = query.replace("::", ".").rsplit(".", 1)[-1]
    assert last in chunks[best].content


RUST = b"""\
//! Routing.

mod path_router;

/// Routes requests by path.
#[derive(Debug, Clone)]
#[must_use]
pub struct PathRouter {
    routes: Vec<Route>,
}
"""

JS = b"""\
/**
 * Send a response body.
 */

res.send = function send(body) {
  return this.end(body);
};
"""


def test_rust_attributes_between_doc_and_item_stay_with_the_item() -> None:
    chunks = chunk_file("src/lib.rs", RUST, "rust")
    item = next(c for c in chunks if c.symbol == "PathRouter")
    assert item.content.startswith("/// Routes requests by path.\n#[derive")


def test_a_module_declaration_is_not_a_definition() -> None:
    """`mod path_router;` only points at a file: the struct it nearly names is the definition."""
    chunks = chunk_file("src/lib.rs", RUST, "rust")
    assert "path_router" not in [c.symbol for c in chunks]
    matched = SymbolIndex.build(chunks).match("path_router")
    assert [chunks[i].symbol for i in matched] == ["PathRouter"]


def test_a_jsdoc_block_one_blank_line_above_its_function_stays_with_it() -> None:
    chunks = chunk_file("lib/response.js", JS, "javascript")
    assert [(c.kind, c.symbol) for c in chunks] == [("function", "res.send")]
    assert chunks[0].content.startswith("/**")


def test_a_plain_comment_a_blank_line_above_does_not_attach() -> None:
    source = b"// Section: helpers.\n\nfunction helper() {\n  return 1;\n}\n"
    chunks = chunk_file("a.js", source, "javascript")
    assert chunks[-1].symbol == "helper" and chunks[-1].content.startswith("function helper")


def test_a_cpp_header_named_h_is_parsed_as_cpp_and_a_c_header_as_c() -> None:
    cpp = b"namespace fmt {\ntemplate <typename T>\nstruct formatter {\n  int width;\n};\n}\n"
    c = b"typedef struct uv_loop_s {\n  void* data;\n} uv_loop_t;\n\nint uv_run(uv_loop_t* loop);\n"
    assert [(k.kind, k.symbol) for k in chunk_file("include/fmt/base.h", cpp, "c")] == [("namespace", "fmt")]
    assert ("class", "uv_loop_s") in [(k.kind, k.symbol) for k in chunk_file("include/uv.h", c, "c")]
    assert all(k.language == "c" for k in chunk_file("include/fmt/base.h", cpp, "c"))
