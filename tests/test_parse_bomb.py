"""A source file tree-sitter parses into gigabytes (issue 36, item 1): 32,760 bytes of `a<` in
Java took 2.6 GB to parse, `a<b<` in C# 2.6 GB, `a<b,` in TypeScript 1.35 GB, all at the end
of the input where nothing could stop it, and a `codepager serve` indexing such a file at
start peaked at 3.4 GB, or died of SIGSEGV under a 3 GB address-space limit. Every parse now
runs in a chunking worker limited to `PARSE_MEMORY_BUDGET` over what it holds at start; a
file that takes its worker past that is indexed as plain text, and the index says so."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import resource
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

import search_engine.chunking.jobs as chunk_jobs
from search_engine.chunking.jobs import ChunkJob, ChunkStream, over_budget_warnings
from search_engine.chunking.workers import PARSE_MEMORY_BUDGET
from search_engine.config import EngineConfig
from search_engine.errors import IndexDamagedError, SearchError
from search_engine.files.discovery import discover
from search_engine.files.paths import SearchLocation
from search_engine.index.manager import IndexManager
from search_engine.index.store import IndexStore, index_dir
from tests.index_helpers import CountingEmbedder
from tests.server_helpers import page_matches, peak_rss, pid_with_args, serve_env, stdio_client, structured

MB = 1 << 20
MARKER = b"// zebra quasar marker\n"  # a line to search the bomb by: it still takes 2.6 GB
# Each took 1.3-2.6 GB parsed in-process; the C++ one grows all through its parse (1.6 GB).
BOMBS = {
    "src/Bomb.java": MARKER + b"a<" * 16368,  # 32,759 bytes, under the old 32 KiB unwatched size
    "src/Bomb.cs": b"a<b<" * 8190,
    "src/Bomb.ts": b"a<b," * 8190,
    "src/Bomb.tsx": b"a<b," * 8190,
    "src/Bomb.cpp": b"a<" * 262_144,
}
# Real code in the same grammars, chunked by structure in the same workers.
SOURCES = {
    "src/Good.java": b"class Good {\n  int add(int a, int b) {\n    return a + b;\n  }\n}\n",
    "src/Good.cs": b"class Good {\n  int Add(int a, int b) {\n    return a + b;\n  }\n}\n",
    "src/good.ts": b"export function add(a: number, b: number): number {\n  return a + b;\n}\n",
    "src/good.tsx": b"export function View(): JSX.Element {\n  return <div>hi</div>;\n}\n",
    "src/good.cpp": b"int add(int a, int b) {\n  return a + b;\n}\n",
}


def write_tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def jobs_of(root: Path) -> list[ChunkJob]:
    files = discover(SearchLocation(root, None), config=EngineConfig(cache_dir=root.parent / "cache")).files
    return [ChunkJob(f, None) for f in files]


@pytest.mark.slow
async def test_a_parse_bomb_leaves_the_server_small_alive_and_the_file_searchable_as_plain_text(
    tmp_path: Path,
) -> None:
    """The issue's attack on a real `codepager serve`, under the reporter's 3 GB address-space
    limit: the server indexed the 32 KB Java file in-process, and died of SIGSEGV (3.4 GB peak
    without the limit). Now its peak stays under 500 MB, it answers, the file's text is found
    by hybrid search, and index_status names the file and why."""
    root = write_tree(tmp_path / "repo", {"src/Bomb.java": BOMBS["src/Bomb.java"], **SOURCES})
    async with stdio_client(root, tmp_path, serve_env(tmp_path)) as client:
        pid = pid_with_args("serve", str(root))
        resource.prlimit(pid, resource.RLIMIT_AS, (3 << 30, 3 << 30))  # before its first build
        await client.call_tool("reindex", {})
        status = structured(await client.call_tool("index_status", {}))
        while status["building"]:
            await asyncio.sleep(0.1)
            status = structured(await client.call_tool("index_status", {}))
        hits = page_matches(structured(await client.call_tool("hybrid_search", {"query": "zebra quasar marker"})))
        peak = peak_rss(pid)
    assert status["error"] is None and status["files"] == 1 + len(SOURCES), status
    assert status["warnings"] == over_budget_warnings(["src/Bomb.java"]), status
    assert "src/Bomb.java: indexed as plain text" in status["warnings"][0]
    assert hits and hits[0]["path"] == "src/Bomb.java" and "zebra quasar marker" in hits[0]["text"], hits
    assert peak < 500 * MB, f"server peak RSS {peak // MB} MB"


@pytest.mark.slow
def test_each_grammars_bomb_is_plain_text_and_the_files_around_it_are_chunked_as_usual(tmp_path: Path) -> None:
    """Java, C#, TypeScript, TSX and C++ bombs among real files of the same grammars, read by
    two workers: each bomb kills its worker, and only the bomb is chunked as plain text, every
    byte of it still searchable; results keep their order. This process parses none of them:
    its peak grows by far less than one bomb."""
    root = write_tree(tmp_path / "repo", {**BOMBS, **SOURCES})
    jobs = jobs_of(root)
    assert len(jobs) == len(BOMBS) + len(SOURCES)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with ChunkStream(jobs, 1 << 20, 2) as stream:
        results = list(stream)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    assert len(results) == len(jobs)
    for job, result in zip(jobs, results, strict=True):
        assert result is not None and result.chunks is not None
        path = job.file.path
        assert {c.path for c in result.chunks} == {path}
        if path in BOMBS:
            assert result.over_budget, path
            assert {c.kind for c in result.chunks} == {"window"}, path
            assert "".join(c.content for c in result.chunks).encode() == BOMBS[path].replace(b"\n", b""), path
        else:
            assert not result.over_budget, path
            assert {c.kind for c in result.chunks} & {"function", "class"}, (path, result.chunks)
    assert grown < 100 * MB, f"the indexing process grew {grown // MB} MB"


def test_a_worker_that_cannot_start_fails_the_build_instead_of_blaming_every_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that dies before any file (here: its initializer exits) is no file's fault:
    the stream fails with an error saying so, rather than indexing every file as plain text."""
    jobs = jobs_of(write_tree(tmp_path / "repo", SOURCES))

    def dying_pool(workers: int) -> ProcessPoolExecutor:
        context = multiprocessing.get_context("forkserver")
        return ProcessPoolExecutor(workers, mp_context=context, initializer=os._exit, initargs=(1,))

    monkeypatch.setattr(chunk_jobs, "chunking_pool", dying_pool)
    with pytest.raises(SearchError, match="chunking worker processes cannot start"), ChunkStream(jobs, 1 << 20, 2) as s:
        list(s)


@pytest.mark.slow
def test_the_index_keeps_a_plain_text_file_until_it_changes(tmp_path: Path, counting: CountingEmbedder) -> None:
    """The over-budget list is part of the generation: an update that copies the bomb's rows
    keeps it listed, so the index goes on saying so without parsing it again; one that finds
    it fixed drops it. `IndexStatus.warnings` is what index_status and `codepager index` say."""
    root = write_tree(tmp_path / "repo", {"src/Bomb.java": BOMBS["src/Bomb.java"], **SOURCES}).resolve()
    manager = IndexManager(EngineConfig(cache_dir=tmp_path / "cache"), embedder=counting)
    manager.update(root)
    assert manager.status(root).over_budget == ("src/Bomb.java",)
    (root / "src/Good.java").write_bytes(SOURCES["src/Good.java"] + b"// edited\n")
    assert manager.update(root).changed
    status = manager.status(root)
    assert status.over_budget == ("src/Bomb.java",) and status.warnings == over_budget_warnings(["src/Bomb.java"])
    assert f"{PARSE_MEMORY_BUDGET // MB} MB" in status.warnings[0]
    (root / "src/Bomb.java").write_bytes(b"class Bomb {\n  int one() {\n    return 1;\n  }\n}\n")
    manager.update(root)
    assert manager.status(root).over_budget == () and manager.status(root).warnings == []
    assert [(c.kind, c.symbol) for c in manager.get(root).chunks if c.path == "src/Bomb.java"] == [("class", "Bomb")]


def test_the_warnings_name_twenty_files_then_count_the_rest() -> None:
    paths = [f"src/B{i}.java" for i in range(25)]
    warnings = over_budget_warnings(paths)
    assert [w.split(":")[0] for w in warnings[:20]] == paths[:20]
    assert warnings[20] == "5 more files indexed as plain text for the same reason" and len(warnings) == 21
    assert over_budget_warnings([]) == []


def test_an_over_budget_list_naming_a_file_the_index_lacks_is_damage(
    tmp_path: Path, counting: CountingEmbedder
) -> None:
    """Read back from a cache dir someone else may write to: a list naming files outside the
    file table is damage, so the generation is rebuilt rather than reporting made-up names."""
    root = write_tree(tmp_path / "repo", SOURCES).resolve()
    manager = IndexManager(EngineConfig(cache_dir=tmp_path / "cache"), embedder=counting)
    manager.update(root)
    store = IndexStore(index_dir(tmp_path / "cache", root))
    snapshot = store.load()
    assert snapshot is not None and snapshot.over_budget == frozenset()
    (snapshot.directory / "over_budget.msgpack").write_bytes(b"\x91\xa9not/there")  # ["not/there"]
    snapshot.release()
    with pytest.raises(IndexDamagedError, match="inconsistent"):
        store.load()
    again = IndexManager(EngineConfig(cache_dir=tmp_path / "cache"), embedder=counting).update(root)
    assert again.rebuilt and store.read_over_budget() == []
