"""Crafted (not cut-short) values in an index generation: ids past what they index, values of the
wrong type, a manifest nested too deep, .npy headers claiming 10^12 rows. Found by an audit.
Only the extents were checked (`_check_extents`, `reading(...)`, the lexical size check): the
values inside the columns (file ids, kind ids, posting document ids, definition chunk ids,
FileEntry first/count) never were, nor were .npy shapes bounded before numpy allocated them (a
claim of 10^12 rows was a MemoryError, with no RSS: numpy allocates lazily). So these escaped
as IndexError, TypeError, AttributeError, OverflowError, RecursionError, MemoryError or a bare
ValueError, not IndexDamagedError, and no rebuild was triggered: every semantic or hybrid
search (or every update: the background indexer, `reindex`, `codepager index`) failed, in
every new process too, until someone ran a full rebuild by hand, and the MCP answer was an
unmapped internal error, not `index_damaged`. Each case's id names the exception it raised
before; now each is damage, answered by a rebuild."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
from numpy.lib import format as npy

from search_engine import SearchMode, SearchRequest
from search_engine.config import EngineConfig
from search_engine.engine import SearchEngine
from search_engine.index.manager import IndexManager
from tests.crafted_index_helpers import build, put_rows, rows
from tests.index_helpers import CountingEmbedder, write_repo


def _set(path: Path, column: str, value: int) -> None:
    r = rows(path)
    r[column][0 if column == "file" else slice(None)] = value
    put_rows(path, r)


def _npy_claiming(path: Path, shape: tuple[int, ...]) -> None:
    with open(path, "wb") as f:
        npy.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": shape})


def _edit_npy(path: Path, edit: Callable[[np.ndarray], np.ndarray]) -> None:
    np.save(path, edit(np.load(path)))


def _files(gen: Path, path: str, value: str | Callable[[list[Any]], list[Any]]) -> None:
    table = msgspec.msgpack.decode((gen / "files.msgpack").read_bytes())
    table[path] = value(table[path]) if callable(value) else value
    (gen / "files.msgpack").write_bytes(msgspec.msgpack.encode(table))


def _strings(gen: Path, key: str, edit: Callable[[list[Any]], list[Any]]) -> None:
    value = msgspec.msgpack.decode((gen / "chunks" / "strings.msgpack").read_bytes())
    value[key] = edit(value[key])
    (gen / "chunks" / "strings.msgpack").write_bytes(msgspec.msgpack.encode(value))


def _lexical_files(gen: Path) -> None:
    meta = json.loads((gen / "lexical" / "lexical.json").read_text())
    meta["files"][0] = "elsewhere.py"
    (gen / "lexical" / "lexical.json").write_text(json.dumps(meta))


def _int_definition_names(gen: Path) -> None:
    count = len(np.load(gen / "chunks" / "defs.chunk.npy"))
    (gen / "chunks" / "defs.names.msgpack").write_bytes(msgspec.msgpack.encode(list(range(count))))


def _manifest_text(text: str) -> Callable[[Path], None]:
    """A craft that makes `text` the generation's manifest."""

    def craft(gen: Path) -> None:
        (gen / "manifest.json").write_text(text)

    return craft


def _huge_coarse_centroids(gen: Path) -> None:
    """Coarse lists planted (so the coarse index is read), their centroids claiming 10^12 rows."""
    np.save(gen / "coarse.lists.npy", np.zeros(6, np.int32))
    _npy_claiming(gen / "coarse.centroids.npy", (10**12, 256))


SEARCH_CASES: dict[str, Callable[[Path], None]] = {
    "rows.kind past the kinds (IndexError)": lambda g: _set(g, "kind", 999),
    "rows.file past the paths (IndexError)": lambda g: _set(g, "file", 50),
    "lexical doc ids past the chunks (IndexError)": lambda g: _edit_npy(
        g / "lexical" / "chunks.docs.npy", lambda a: np.full_like(a, 10**6)
    ),
    "lexical doc ids as floats (IndexError)": lambda g: _edit_npy(
        g / "lexical" / "chunks.docs.npy", lambda a: a.astype("f8")
    ),
    "lexical file list differs (bare ValueError)": _lexical_files,
    "definition chunk ids past the chunks (IndexError)": lambda g: _edit_npy(
        g / "chunks" / "defs.chunk.npy", lambda a: np.full_like(a, 10**6)
    ),
    "definition names that are ints (AttributeError)": _int_definition_names,
    "a text bound of 2**64-1 (OverflowError)": lambda g: _strings(g, "text_bounds", lambda b: [*b[:-1], 2**64 - 1]),
    "manifest nested 200,000 deep (RecursionError)": _manifest_text("[" * 200_000),
    "manifest a list (AttributeError)": _manifest_text("[1]"),
    "file_vectors.npy claiming 10^12 rows (MemoryError)": lambda g: _npy_claiming(
        g / "file_vectors.npy", (10**12, 256)
    ),
    "coarse lists planted, centroids claiming 10^12 rows (MemoryError)": _huge_coarse_centroids,
}

UPDATE_CASES: dict[str, Callable[[Path], None]] = {
    "FileEntry count past the rows (IndexError)": lambda g: _files(g, "app/render.py", lambda e: [*e[:4], 10**9]),
    "FileEntry first past the rows (IndexError)": lambda g: _files(g, "app/render.py", lambda e: [*e[:3], 100, e[4]]),
    "FileEntry a string (TypeError)": lambda g: _files(g, "app/render.py", "abcde"),
}


@pytest.mark.parametrize("craft", SEARCH_CASES.values(), ids=list(SEARCH_CASES))
def test_a_crafted_generation_is_rebuilt_by_the_next_search(
    tmp_path: Path, counting: CountingEmbedder, craft: Callable[[Path], None]
) -> None:
    """A built generation crafted as the case says. Before: the hybrid search failed with the
    exception the case's id names, and so did every later one. Now the damage is found, the
    index rebuilt, and the search answers, app/client.py first."""
    repo = write_repo(tmp_path / "repo")
    cache = tmp_path / "cache"
    craft(build(repo, cache, counting))
    engine = SearchEngine(EngineConfig(cache_dir=cache))
    engine._indexes = IndexManager(engine.config, embedder=counting)

    try:
        result = engine.search(SearchRequest(mode=SearchMode.HYBRID, query="retry a failing call", root=str(repo)))
    finally:
        # The background freshness check must end before pytest parses source for its report:
        # CPython 3.11 shares the AST constructor's recursion depth between threads (see
        # search_engine/index/arrays.py), and a report built meanwhile dies with SystemError.
        engine.indexes.wait_idle(repo)
    assert result.matches[0].path == "app/client.py"


@pytest.mark.parametrize("craft", UPDATE_CASES.values(), ids=list(UPDATE_CASES))
def test_a_crafted_file_table_is_rebuilt_by_the_next_update(
    tmp_path: Path, counting: CountingEmbedder, craft: Callable[[Path], None]
) -> None:
    """A file-table entry of a built generation whose count or first chunk is past the rows, or
    that is a string. Before: every update (the background indexer, `reindex`, `codepager
    index`) failed with the exception the case's id names. Now the update after a file is
    edited finds the table damaged and rebuilds the index."""
    repo = write_repo(tmp_path / "repo")
    cache = tmp_path / "cache"
    craft(build(repo, cache, counting))
    (repo / "README.md").write_text("# Demo\n\nEdited.\n")

    stats = IndexManager(EngineConfig(cache_dir=cache), embedder=counting).update(repo)

    assert stats.rebuilt
