"""Chunking: code-aware boundaries and names for every supported grammar, bounded sizes,
exact spans, nothing left unsearchable, and the line-window fallback."""

from __future__ import annotations

import itertools
import textwrap
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search_engine.chunking.chunk import Chunk
from search_engine.chunking.chunker import MAX_CHARS, WINDOW_OVERLAP_LINES, chunk_file
from search_engine.files.languages import language_for
from tests.index_helpers import assert_well_formed


def chunks_of(path: str, source: str, language: str | None) -> list[Chunk]:
    return chunk_file(path, source.encode(), language)


def names(chunks: list[Chunk]) -> list[tuple[str, str | None]]:
    return [(c.kind, c.symbol) for c in chunks]


PYTHON = '''\
"""Module docstring."""
import os

RETRIES = 3


# Retries a call.
@decorator
def retry(fn):
    return fn


class ClientSession:
    """A session."""

    timeout = 5

    def close(self):
        return None

if __name__ == "__main__":
    retry(print)
'''


def test_python_definitions_get_their_own_chunks_and_names() -> None:
    chunks = chunks_of("pkg/client.py", PYTHON, "python")
    assert names(chunks) == [
        ("module", None),
        ("function", "retry"),
        ("class", "ClientSession"),
        ("module", None),
    ]
    retry = chunks[1]
    # the comment block right above and the decorator belong to the function
    assert retry.content.startswith("# Retries a call.\n@decorator\ndef retry")
    assert (retry.line_start, retry.line_end) == (7, 10)
    assert all(c.path == "pkg/client.py" and c.language == "python" for c in chunks)
    assert_well_formed(PYTHON.encode(), chunks)


def big_class(methods: int = 30) -> str:
    body = "\n".join(
        f"    def method_{i}(self, value):\n"
        f"        # step {i} of the protocol\n"
        f"        return self.transform(value, {i}) + {i}\n"
        for i in range(methods)
    )
    return f'class Big(Base):\n    """Docs of Big."""\n\n    limit = 10\n\n{body}'


def test_a_large_class_becomes_a_header_plus_qualified_methods() -> None:
    source = big_class()
    assert len(source) > 2 * MAX_CHARS
    chunks = chunks_of("big.py", source, "python")
    header = chunks[0]
    assert (header.kind, header.symbol) == ("class", "Big")
    assert "class Big(Base)" in header.content and "limit = 10" in header.content
    methods = [c for c in chunks if c.kind == "method"]
    assert [c.symbol for c in methods] == [f"Big.method_{i}" for i in range(30)]
    assert all(c.content.lstrip().startswith(f"def {str(c.symbol).split('.')[1]}(") for c in methods)
    assert_well_formed(source.encode(), chunks)


def test_a_large_function_is_split_at_statements_and_keeps_its_name() -> None:
    statements = "\n".join(f"    total += compute_step_{i}(argument_{i}, option=True)" for i in range(80))
    source = f"def pipeline(argument):\n    total = 0\n{statements}\n    return total\n"
    chunks = chunks_of("p.py", source, "python")
    assert len(chunks) >= 3
    assert {(c.kind, c.symbol) for c in chunks} == {("function", "pipeline")}
    assert chunks[0].content.startswith("def pipeline(argument):")
    for c in chunks:  # pieces are whole lines, never a statement cut in two
        assert c.content.startswith("def") or c.content.startswith("    ")
        assert c.content.endswith(")") or c.content.endswith("total")
    assert_well_formed(source.encode(), chunks)


def test_nested_functions_are_named_inside_their_parent() -> None:
    inner = "\n".join(f"        value = value * {i} + helper_{i}(value)" for i in range(40))
    source = f"def outer(value):\n    def inner(value):\n{inner}\n        return value\n    return inner(value)\n"
    chunks = chunks_of("n.py", source, "python")
    assert ("function", "outer.inner") in names(chunks)
    assert_well_formed(source.encode(), chunks)


SAMPLES = {
    "javascript": (
        "app.js",
        """\
import x from "y";
// Starts the app.
export function start(port) {
  return listen(port);
}
const stop = (server) => server.close();
class Router {
  route(path) { return path; }
}
module.exports.handler = function (req) { return req; };
""",
        [
            ("module", None),
            ("function", "start"),
            ("function", "stop"),
            ("class", "Router"),
            ("function", "module.exports.handler"),
        ],
    ),
    "typescript": (
        "api.ts",
        """\
export interface Options { retries: number }
export type Id = string;
export abstract class Client<T> {
  abstract send(body: T): Promise<void>;
}
export enum Mode { Fast, Slow }
namespace Internal { export function helper(): void {} }
export const make = (o: Options): Client<string> => new Impl(o);
""",
        [
            ("class", "Options"),
            ("class", "Id"),
            ("class", "Client"),
            ("class", "Mode"),
            ("namespace", "Internal"),
            ("function", "make"),
        ],
    ),
    "tsx": (
        "view.tsx",
        """\
export function Button(props: Props) {
  return <button onClick={props.onClick}>{props.label}</button>;
}
""",
        [("function", "Button")],
    ),
    "go": (
        "server.go",
        """\
package server

// Server serves requests.
type Server struct {
\taddr string
}

// Start listens.
func (s *Server) Start() error {
\treturn nil
}

func New(addr string) *Server { return &Server{addr: addr} }
""",
        [("module", None), ("class", "Server"), ("method", "Server.Start"), ("function", "New")],
    ),
    "rust": (
        "lib.rs",
        """\
use std::io;

/// A point.
pub struct Point { x: i32 }

impl Point {
    pub fn new() -> Self { Point { x: 0 } }
}

pub trait Shape { fn area(&self) -> f64; }

mod tests { fn check() {} }

pub fn main() {}
""",
        [("module", None), ("class", "Point"), ("class", "Shape"), ("namespace", "tests"), ("function", "main")],
    ),  # a struct and its impl are neighbours of one name: one chunk
    "java": (
        "Cache.java",
        """\
package demo;
import java.util.Map;

/** A cache. */
public class Cache {
    private Map<String, String> items;
    public String get(String key) { return items.get(key); }
}
""",
        [("module", None), ("class", "Cache")],
    ),
    "c": (
        "buf.c",
        """\
#include <stdlib.h>

typedef struct { int len; } buffer;

/* Frees a buffer. */
static void buffer_free(buffer *b) {
    free(b);
}

enum color { RED, GREEN };
""",
        [("module", None), ("class", "buffer"), ("function", "buffer_free"), ("class", "color")],
    ),
    "cpp": (
        "pool.cpp",
        """\
#include <vector>

namespace net {
class Pool {
 public:
  void drain();
};
}

void net::Pool::drain() {
  items.clear();
}

template <typename T>
T twice(T v) { return v + v; }
""",
        [("module", None), ("namespace", "net"), ("function", "net.Pool.drain"), ("function", "twice")],
    ),
}


@pytest.mark.parametrize("language", sorted(SAMPLES))
def test_each_grammar_names_its_definitions(language: str) -> None:
    path, source, expected = SAMPLES[language]
    chunks = chunks_of(path, source, language)
    assert names(chunks) == expected
    assert all(c.language == language for c in chunks)
    assert_well_formed(source.encode(), chunks)


def test_large_members_are_qualified_in_every_brace_language() -> None:
    methods = "\n".join(
        f"  public int compute{i}(int value) {{\n    return helper{i}(value) * {i} + offset{i};\n  }}"
        for i in range(40)
    )
    source = f"public class Engine {{\n  private int offset;\n{methods}\n}}\n"
    chunks = chunks_of("Engine.java", source, "java")
    assert chunks[0].symbol == "Engine" and chunks[0].kind == "class"
    assert [c.symbol for c in chunks if c.kind == "method"] == [f"Engine.compute{i}" for i in range(40)]
    assert_well_formed(source.encode(), chunks)


def test_markdown_windows_break_at_headings_and_carry_them() -> None:
    sections = [
        f"## Section {i}\n\n" + "\n".join(f"Sentence {j} about topic {i}." for j in range(30)) for i in range(4)
    ]
    source = "# Title\n\n" + "\n\n".join(sections) + "\n"
    chunks = chunks_of("docs/guide.md", source, "markdown")
    assert {c.kind for c in chunks} == {"section"}
    assert chunks[0].symbol == "Title"  # a heading right under the title does not cut it off
    for i in range(1, 4):
        opening = [c for c in chunks if c.content.startswith(f"## Section {i}")]
        assert len(opening) == 1 and opening[0].symbol == f"Section {i}"
    assert all(c.symbol is not None for c in chunks)
    assert_well_formed(source.encode(), chunks)


def test_unknown_files_get_overlapping_line_windows() -> None:
    source = "\n".join(f"key_{i} = value number {i} for the configuration" for i in range(200)) + "\n"
    chunks = chunks_of("settings.conf", source, None)
    assert len(chunks) > 3
    assert {(c.kind, c.symbol) for c in chunks} == {("window", None)}
    for a, b in itertools.pairwise(chunks):
        assert b.line_start == a.line_end + 1 - WINDOW_OVERLAP_LINES
    assert_well_formed(source.encode(), chunks)


def test_a_file_that_does_not_parse_falls_back_to_windows() -> None:
    garbage = "\n".join(f"))) ((( {i} ]]] :: <<<< @@ def ??? class" for i in range(100)) + "\n"
    chunks = chunks_of("broken.py", garbage, "python")
    assert chunks and {c.kind for c in chunks} == {"window"}
    assert_well_formed(garbage.encode(), chunks)


def test_a_file_with_a_local_syntax_error_keeps_its_structure() -> None:
    source = "def good():\n    return 1\n\n\ndef bad(:\n    pass\n\n\nclass Fine:\n    x = 1\n"
    chunks = chunks_of("partly.py", source, "python")
    assert ("function", "good") in names(chunks) and ("class", "Fine") in names(chunks)
    assert_well_formed(source.encode(), chunks)


def test_an_over_long_line_is_sliced_on_character_boundaries() -> None:
    line = "é" * (3 * MAX_CHARS)  # two bytes per character: slices must not split one
    data = (line + "\n").encode()
    chunks = chunk_file("blob.txt", data, None)
    assert len(chunks) >= 3
    assert "".join(c.content for c in chunks) == line
    assert_well_formed(data, chunks)


DEEP = 3000  # nesting levels: a few KB of file, far past Python's recursion limit of 1,000


@pytest.mark.slow
@pytest.mark.parametrize(
    ("path", "data"),
    [
        ("calls.js", b"f(" * DEEP + b"1" + b")" * DEEP + b";\n"),
        ("blocks.js", b"function a() {\n" * DEEP + b"return 1;\n" + b"}\n" * DEEP),
        ("parens.c", b"int f() { return " + b"(" * DEEP + b"1" + b")" * DEEP + b"; }\n"),
        ("classes.py", b"".join(b" " * i + b"class A%d:\n" % i for i in range(DEEP)) + b" " * DEEP + b"pass\n"),
    ],
    ids=["js-calls", "js-functions", "c-parens", "py-classes"],
)
def test_pathologically_deep_nesting_is_chunked_not_a_recursion_error(path: str, data: bytes) -> None:
    """The walk recursed once a nesting level: 3,000 nested calls (6 KB) raised RecursionError,
    which failed the index build of the whole tree. Past the nesting limit it windows."""
    chunks = chunk_file(path, data, language_for(path))
    assert chunks
    assert_well_formed(data, chunks)


@pytest.mark.slow
def test_a_one_line_minified_file_is_windowed_once() -> None:
    """Every statement of a one-line minified file shares the over-long line, so each was
    windowed as the whole line: n statements, n copies of its windows (a 120 KB line cost 8 s
    and 770 MB; a 1 MB one, the default max_file_size, tens of GB). Memory is now proportional
    to the file (~130 bytes of Python objects a byte, the parse tree's nodes; 3,300 before)."""
    data = b"var a=function(b){return b+1};" * 2000  # 60 KB, one line
    tracemalloc.start()
    try:
        chunks = chunk_file("app.min.js", data, "javascript")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 500 * len(data), f"{peak / 2**20:.0f} MB for a {len(data) // 1024} KB line"
    assert "".join(c.content for c in chunks).encode() == data
    assert_well_formed(data, chunks)


@pytest.mark.parametrize("source", ["", "\n\n   \n", "}\n};\n"])
def test_nothing_searchable_gives_no_chunks(source: str) -> None:
    assert chunks_of("empty.py", source, "python") == []
    assert chunks_of("empty.txt", source, None) == []


def test_windows_dedent_nothing_and_keep_bytes_of_invalid_utf8() -> None:
    data = b"line one \xff\xfe\n  indented two\n"
    [chunk] = chunk_file("bin.txt", data, None)
    assert chunk.content == data[:-1].decode("utf-8", "replace")
    assert (chunk.byte_start, chunk.byte_end) == (0, len(data) - 1)


code_line = st.sampled_from(
    [
        "def f(x):",
        "    return x",
        "class A:",
        "    y = 1",
        "",
        "# note",
        "if x:",
        "    pass",
        "print('hi')",
        "    def g(self):",
        "        return self",
        "@dec",
        ")",
        "x = [",
        "  1,",
        "]",
    ]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(code_line, max_size=120), language=st.sampled_from(["python", None, "markdown"]))
def test_any_input_gives_well_formed_chunks(lines: list[str], language: str | None) -> None:
    data = ("\n".join(lines) + "\n").encode()
    assert_well_formed(data, chunk_file("gen.py", data, language))


def test_real_module_chunks_stay_bounded_and_named() -> None:
    import search_engine.chunking.chunker as module

    source = Path(module.__file__).read_bytes()
    chunks = chunk_file("search_engine/chunking/chunker.py", source, "python")
    symbols = {c.symbol for c in chunks}
    assert {"chunk_file", "_Walker.block", "_Walker.pack", "_text_windows"} <= symbols
    assert_well_formed(source, chunks)


def test_textwrap_sample_is_stable() -> None:
    """The same bytes always give the same chunks (the index relies on it to reuse vectors)."""
    source = textwrap.dedent(PYTHON).encode()
    assert chunk_file("a.py", source, "python") == chunk_file("a.py", source, "python")
