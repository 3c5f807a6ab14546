"""Regex search with the real rg on real files: what a Match holds, flags, context, long and
non-UTF-8 lines, binary and size rules, truncation, ordering, bad patterns and time limits."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from search_engine.config import EngineConfig
from search_engine.engine import SearchEngine
from search_engine.errors import InvalidQueryError, PathNotFoundError, SearchTimeoutError
from search_engine.files.discovery import discover
from search_engine.files.paths import SearchLocation
from search_engine.models import MatchType, SearchRequest, SearchResult
from search_engine.regex.search import ELLIPSIS, regex_search
from tests.code_tree import write_code_tree

CONFIG = EngineConfig()


def search(root: Path, query: str, config: EngineConfig = CONFIG, **options: Any) -> SearchResult:
    return regex_search(SearchRequest(query=query, root=str(root), **options), config)


def write(root: Path, rel: str, data: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    path.write_bytes(data)
    return path


def rg_children_in(root: Path) -> list[int]:
    """rg processes still running with `root` as their working directory."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/cwd") == str(root) and Path(os.readlink(f"/proc/{entry}/exe")).name == "rg":
                pids.append(int(entry))
        except OSError:
            continue
    return pids


def test_match_fields(tmp_path: Path) -> None:
    data = "x = 1\nfoo = bar(foo)\n"
    write(tmp_path, "src/app.py", data)
    [m] = search(tmp_path, "foo").matches
    assert (m.path, m.line_start, m.line_end) == ("src/app.py", 2, 2)
    assert (m.type, m.language, m.score) == (MatchType.REGEX, "python", None)
    assert m.content == "foo = bar(foo)"
    # first submatch start .. last submatch end, absolute in the file
    assert data.encode()[m.byte_start : m.byte_end] == b"foo = bar(foo"
    assert (m.context_before, m.context_after) == ((), ())


def test_engine_dispatches_regex(tmp_path: Path) -> None:
    write(tmp_path, "a.txt", "needle\n")
    request = SearchRequest(query="needle", root=str(tmp_path))
    assert SearchEngine(CONFIG).search(request).matches == regex_search(request, CONFIG).matches
    assert SearchEngine(CONFIG).generation(request) == 0


def test_unicode_offsets_are_bytes(tmp_path: Path) -> None:
    text = "naïve ☃ needle ☃\n"
    write(tmp_path, "u.md", text)
    [m] = search(tmp_path, "needle").matches
    assert m.content == "naïve ☃ needle ☃"
    assert text.encode()[m.byte_start : m.byte_end] == b"needle"
    assert m.language == "markdown"


def test_byte_spans_are_the_files_own_even_after_a_byte_order_mark(tmp_path: Path) -> None:
    """rg decoded a file starting with a BOM and reported offsets into its transcoded text:
    3 bytes early after a UTF-8 BOM (and disagreeing with the index's spans of the same
    file), anywhere in a UTF-16 file. It now reads bytes as they are, as discovery does: a
    UTF-16 file is full of NULs, so it is binary to both, and regex and semantic search
    agree on which files exist."""
    utf8 = b"\xef\xbb\xbfdef f():\n    return 'needle'\n"
    write(tmp_path, "bom8.py", utf8)
    write(tmp_path, "bom16.py", "def g():\n    return 'needle'\n".encode("utf-16"))
    [m] = search(tmp_path, "needle").matches
    assert (m.path, m.line_start) == ("bom8.py", 2)
    assert utf8[m.byte_start : m.byte_end] == b"needle"
    assert [f.path for f in discover(SearchLocation(tmp_path, None)).files] == ["bom8.py"]


def test_invalid_utf8_line(tmp_path: Path) -> None:
    raw = b"ok line\nbad \xff\xfe needle here\n"
    write(tmp_path, "bad.txt", raw)
    [m] = search(tmp_path, "needle").matches
    assert m.content == "bad \ufffd\ufffd needle here"
    assert raw[m.byte_start : m.byte_end] == b"needle"
    assert m.line_start == 2


def test_flags(tmp_path: Path) -> None:
    write(tmp_path, "f.py", "Needle\nneedle\na.b\naxb\nget\ngetter\n")
    assert [m.line_start for m in search(tmp_path, "needle").matches] == [2]
    assert [m.line_start for m in search(tmp_path, "needle", ignore_case=True).matches] == [1, 2]
    assert [m.line_start for m in search(tmp_path, "a.b").matches] == [3, 4]
    assert [m.line_start for m in search(tmp_path, "a.b", fixed_string=True).matches] == [3]
    assert [m.line_start for m in search(tmp_path, "get").matches] == [5, 6]
    assert [m.line_start for m in search(tmp_path, "get", whole_word=True).matches] == [5]


def test_multiline(tmp_path: Path) -> None:
    data = "def f(\n    a,\n):\n    pass\ndef g(): pass\n"
    write(tmp_path, "m.py", data)
    [m] = search(tmp_path, r"def \w+\(\n\s+a", multiline=True).matches
    assert (m.line_start, m.line_end) == (1, 2)
    assert m.content == "def f(\n    a,"
    assert data.encode()[m.byte_start : m.byte_end] == b"def f(\n    a"
    with pytest.raises(InvalidQueryError, match="multiline"):
        search(tmp_path, "f\n")


def test_context_lines(tmp_path: Path) -> None:
    write(tmp_path, "a.txt", "".join(("hit" if n in (5, 7, 15) else f"line {n}") + "\n" for n in range(1, 21)))
    write(tmp_path, "b.txt", "hit\nb2\nb3\n")
    matches = search(tmp_path, "hit", context_lines=2).matches
    got = [(m.path, m.line_start, m.context_before, m.context_after) for m in matches]
    assert got == [
        ("a.txt", 5, ("line 3", "line 4"), ("line 6",)),
        ("a.txt", 7, ("line 6",), ("line 8", "line 9")),
        ("a.txt", 15, ("line 13", "line 14"), ("line 16", "line 17")),
        ("b.txt", 1, (), ("b2", "b3")),  # nothing leaks in from the end of a.txt
    ]


def test_context_lines_are_width_cut(tmp_path: Path) -> None:
    write(tmp_path, "a.txt", "y" * 1000 + "\nhit\n")
    [m] = search(tmp_path, "hit", EngineConfig(max_line_width=50), context_lines=1).matches
    assert m.context_before == ("y" * 50 + ELLIPSIS,)


def test_five_megabyte_single_line(tmp_path: Path) -> None:
    half = 5 * 1024 * 1024 // 2
    data = b"a" * half + b"NEEDLE" + b"b" * half
    write(tmp_path, "min.js", data)
    config = EngineConfig(max_file_size=8 * 1024 * 1024)
    result = search(tmp_path, "NEEDLE", config)
    [m] = result.matches
    assert result.total_count == 1
    assert (m.byte_start, m.byte_end) == (half, half + 6)
    assert m.content.startswith(ELLIPSIS) and m.content.endswith(ELLIPSIS)
    assert len(m.content) == config.max_line_width + 2
    assert "NEEDLE" in m.content and m.content.strip(ELLIPSIS + "ab") == "NEEDLE"


def test_width_cut_never_splits_characters(tmp_path: Path) -> None:
    write(tmp_path, "u.txt", "é" * 3000 + "needle" + "ü" * 3000 + "\n" + "ß" * 2000 + "tail\n")
    first, second = search(tmp_path, "needle|tail", EngineConfig(max_line_width=100)).matches
    assert "needle" in first.content and len(first.content) == 102
    assert set(first.content) <= set("éü…needl")
    # a match at the very end of a long line stays visible
    assert second.content.endswith("tail") and second.content.startswith(ELLIPSIS)
    assert len(second.content) == 101


def test_binary_files_contribute_nothing(tmp_path: Path) -> None:
    write(tmp_path, "text.txt", "needle\n")
    write(tmp_path, "early.bin", b"\0\0needle\n")
    # matches before a late NUL would depend on how much rg had read: dropped as well
    write(tmp_path, "late.dat", b"needle\n" + b"x\n" * 100_000 + b"\0needle\n")
    for _ in range(3):
        assert [m.path for m in search(tmp_path, "needle").matches] == ["text.txt"]


def test_size_limit_and_ignore_rules(tmp_path: Path) -> None:
    write(tmp_path, "small.txt", "needle\n")
    write(tmp_path, "large.txt", "needle\n" + "x" * 200)
    write(tmp_path, "node_modules/dep/index.js", "needle\n")
    write(tmp_path, ".ignore", "ignored/\n")  # not a git checkout: a .gitignore would not apply
    write(tmp_path, "ignored/a.txt", "needle\n")
    write(tmp_path, ".hidden/a.txt", "needle\n")
    result = search(tmp_path, "needle", EngineConfig(max_file_size=100))
    assert [m.path for m in result.matches] == ["small.txt"]


def test_globs_and_sub_path(tmp_path: Path) -> None:
    for rel in ("a.py", "a.md", "src/b.py", "src/c.go", "tests/t.py"):
        write(tmp_path, rel, "needle\n")

    def paths(**kw: Any) -> list[str]:
        return [m.path for m in search(tmp_path, "needle", **kw).matches]

    assert paths(include=["*.py"]) == ["a.py", "src/b.py", "tests/t.py"]
    assert paths(include=["*.py"], exclude=["tests/**"]) == ["a.py", "src/b.py"]
    assert paths(path="src") == ["src/b.py", "src/c.go"]
    assert paths(path="src/c.go") == ["src/c.go"]
    with pytest.raises(InvalidQueryError, match="invalid glob"):
        paths(include=["{a"])


def test_truncation_keeps_the_first_matches_and_the_true_total(tmp_path: Path) -> None:
    root = write_code_tree(tmp_path / "repo", files=12, hits_per_file=20)
    full = search(root, "needle")
    assert (full.total_count, full.truncated, len(full.matches)) == (240, False, 240)
    for limit in (1, 7, 50, 239):
        cut = search(root, "needle", max_results=limit)
        assert (cut.total_count, cut.truncated) == (240, True)
        assert cut.matches == full.matches[:limit]
    assert search(root, "needle", max_results=240).truncated is False


def test_order_is_path_then_line_and_repeatable(tmp_path: Path) -> None:
    for i in range(150):
        write(tmp_path, f"d{i % 9}/sub{i % 4}/f{i:03d}.py", "".join(f"needle {j}\nother\n" for j in range(5)))
    runs = [search(tmp_path, "needle").matches for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    keys = [(m.path, m.line_start) for m in runs[0]]
    assert keys == sorted(keys) and len(keys) == 750


@pytest.mark.parametrize(
    ("pattern", "position"),
    [
        ("a{2,1}", 1),  # rg's caret, mapped back through its (?:...) wrapper
        ("ab[z-a]", 3),
        ("ab\\q", 2),
        ("*a", 0),
        ("(foo", 0),  # unbalanced: rg blames its wrapper, the position is found here
        ("x(?P<n>a", 1),
        ("a(b)c)", 5),
        ("[)(]x)", 5),
        ("[]a](b", 4),
        ("foo\\", 3),
    ],
)
def test_invalid_regex_names_the_position(tmp_path: Path, pattern: str, position: int) -> None:
    write(tmp_path, "a.txt", "abc\n")
    with pytest.raises(InvalidQueryError) as err:
        search(tmp_path, pattern)
    assert err.value.position == position
    assert f"at position {position}" in str(err.value) and "fixed_string" in str(err.value)


def test_invalid_regex_with_word_flag(tmp_path: Path) -> None:
    write(tmp_path, "a.txt", "abc\n")
    with pytest.raises(InvalidQueryError) as err:
        search(tmp_path, "a{2,1}", whole_word=True, ignore_case=True)
    assert err.value.position == 1


def test_empty_pattern_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidQueryError, match="empty"):
        search(tmp_path, "")


def test_a_named_fifo_is_refused_before_rg_could_block_on_it(tmp_path: Path) -> None:
    """rg named a FIFO would wait on it until the search timeout; it is refused up front, so no
    rg starts and nothing waits (the timeout itself is test_timeout_on_a_big_search's)."""
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(PathNotFoundError, match="not a regular file or directory"):
        search(tmp_path, "x", EngineConfig(timeout_s=30), path="fifo")
    assert rg_children_in(tmp_path) == []


def test_timeout_on_a_big_search(tmp_path: Path) -> None:
    # ~430,000 matching lines: producing and parsing them takes far longer than 0.2 s.
    for i in range(3):
        write(tmp_path, f"big{i}.txt", b"needle\n" * 140_000)
    with pytest.raises(SearchTimeoutError):
        search(tmp_path, "needle", EngineConfig(timeout_s=0.2))
    assert rg_children_in(tmp_path) == []


@pytest.mark.slow
def test_repeated_searches_leave_no_garbage_behind(tmp_path: Path) -> None:
    # A long-lived server runs searches for days: each must leave the garbage collector as it
    # found it. (Pausing and freezing the collector around the parse once moved each search's
    # cyclic garbage into the oldest generation, where it stayed: ~30 objects per search.)
    import gc

    write(tmp_path, "a.py", "def f():\n    return 1\n" * 50)
    for i in range(20):
        search(tmp_path, f"def|no_such_{i}")
    gc.collect()
    before = len(gc.get_objects())
    for i in range(300):
        search(tmp_path, f"def|no_such_{i}")
        assert gc.isenabled() and gc.get_freeze_count() == 0
    assert len(gc.get_objects()) - before < 1_000


@pytest.mark.slow
@pytest.mark.parametrize("context", [0, 2])
def test_one_file_of_many_matches_holds_no_more_than_the_limit(tmp_path: Path, context: int) -> None:
    """A file's matches were trimmed only when its last event came, so one committable 1 MiB
    file of 349,000 matches cost a search +100 MB (found by an audit; eight at once, 700 MB),
    whatever `max_results` was. Past the limit a file's matches are now only counted: the
    answer is the same and the peak is that of `limit` matches."""
    hits = 200_000
    write(tmp_path, "many.txt", "ab\nx\n" * hits)
    write(tmp_path, "z.txt", "ab\n")
    tracemalloc.start()
    try:
        cut = search(tmp_path, "ab", max_results=500, context_lines=context)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (cut.total_count, cut.truncated, len(cut.matches)) == (hits + 1, True, 500)
    assert cut.matches == search(tmp_path, "ab", max_results=hits + 1, context_lines=context).matches[:500]
    assert cut.matches[499].context_after == (("x",) if context else ())
    assert peak < 8 * 2**20, f"{peak / 2**20:.1f} MiB held for 500 matches"


@pytest.mark.parametrize("context", [0, 10])
def test_a_results_counted_size_is_what_it_holds(tmp_path: Path, context: int) -> None:
    """The session store's memory budget trusts `SearchResult.approx_size`. Context lines were
    counted by their length alone, so with 10 lines of context a result held 6.7x what it was
    counted at (found by an audit: 249 MB counted, 1.8 GB held, inside a 256 MB budget)."""
    block = "xy\n" * 10 + "M\n" + "xy\n" * 10
    for i in range(20):
        write(tmp_path, f"f{i:02d}.txt", block * 50)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = search(tmp_path, "^M$", context_lines=context)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(result.matches) == 1000
    assert 0.6 <= result.approx_size() / held <= 1.6, (result.approx_size(), held)
