"""Incremental updates at scale, with the real model on real code: an update (unchanged files
copied as slices, the lexical postings merged) gives what a fresh build of the same tree
gives and a generation held open survives updates (how searches keep up with the files:
tests/test_live_index.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import psutil
import pytest

import search_engine.chunking.jobs as chunk_jobs
import search_engine.chunking.workers as chunk_workers
import search_engine.index.postings_merge as lexical_merge
import search_engine.index.update as indexing
import search_engine.ranking.lexical as lexical
from search_engine.chunking.chunker import chunk_file
from search_engine.engine import SearchEngine
from search_engine.index.manager import Index, IndexManager
from search_engine.models import SearchMode, SearchRequest
from search_engine.ranking.lexical import LexicalIndex
from tests.index_helpers import (
    REPO,
    CountingEmbedder,
    manager_for,
    write_repo,
)

QUERIES = ("parse the chunk table columns", "merge postings of an update", "close pooled connections",
           "retry with backoff", "walk the tree for files")  # fmt: skip


def real_tree(root: Path) -> Path:
    """The small index repo plus this project's own engine sources: ~40 files of real code
    with many chunks each, so updates have long runs of unchanged files to copy."""
    write_repo(root)
    shutil.copytree(REPO / "search_engine", root / "lib", ignore=shutil.ignore_patterns("model", "__pycache__"))
    return root


def edit_everywhere(root: Path) -> None:
    """One of each change an update handles, spread through the file order."""
    chunking = root / "lib/index/chunk_table.py"  # grows at its top: every later chunk id shifts
    chunking.write_text("def merge_postings_first():\n    return 'merged'\n\n\n" + chunking.read_text())
    files = root / "lib/files/discovery.py"  # shrinks to its first half
    text = files.read_text()
    files.write_text(text[: len(text) // 2].rsplit("\n", 1)[0] + "\n")
    (root / "lib/ranking/hits.py").unlink()
    (root / "lib/grammar_notes.py").write_text(
        "def retry_with_backoff_notes(call):\n    '''Retry, with backoff.'''\n    return call()\n"
    )
    st = (root / "lib/files/paths.py").stat()
    os.utime(root / "lib/files/paths.py", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    client = root / "app/client.py"  # one function edited: its neighbours keep their vectors
    client.write_text(client.read_text().replace("Close every pooled connection.", "Close every pooled socket."))


def assert_same_index(updated: Index, fresh: Index) -> None:
    assert list(updated.chunks) == list(fresh.chunks)
    updated_chunks, updated_factors, updated_names = updated.chunks.definitions()
    fresh_chunks, fresh_factors, fresh_names = fresh.chunks.definitions()
    assert updated_chunks.tolist() == fresh_chunks.tolist()
    assert updated_factors.tolist() == fresh_factors.tolist()
    assert updated_names == fresh_names
    assert updated.snapshot is not None and fresh.snapshot is not None
    ranges = {p: (e.digest, e.first, e.count) for p, e in updated.snapshot.files.items()}
    assert ranges == {p: (e.digest, e.first, e.count) for p, e in fresh.snapshot.files.items()}
    np.testing.assert_array_equal(updated.vectors.codes, fresh.vectors.codes)
    np.testing.assert_array_equal(updated.vectors.words, fresh.vectors.words)
    np.testing.assert_allclose(updated.vectors.scales, fresh.vectors.scales, rtol=1e-6)
    np.testing.assert_allclose(updated.vectors.file_vectors, fresh.vectors.file_vectors, atol=0.01)
    assert updated.lexical.files == fresh.lexical.files
    for token in fresh.lexical.tokens:  # every BM25 score, bit for bit
        np.testing.assert_array_equal(updated.lexical.scores([token]), fresh.lexical.scores([token]), err_msg=token)
        np.testing.assert_array_equal(
            updated.lexical.file_scores([token]), fresh.lexical.file_scores([token]), err_msg=token
        )
    for token in set(updated.lexical.tokens) - set(fresh.lexical.tokens):  # only in deleted text
        assert not updated.lexical.scores([token]).any()


def rankings(manager: IndexManager, root: Path) -> list[list[tuple[str, int]]]:
    engine = SearchEngine(manager.config)
    engine._indexes = manager
    out = []
    for query in QUERIES:
        for mode in (SearchMode.SEMANTIC, SearchMode.HYBRID):
            result = engine.search(SearchRequest(mode=mode, query=query, root=str(root), top_k=15))
            out.append([(m.path, m.line_start) for m in result.matches])
    return out


@pytest.mark.slow
@pytest.mark.parametrize("renumber_slice", [lexical_merge._SLICE, 97], ids=["default", "many-slices"])
def test_an_update_gives_what_a_fresh_build_gives(
    tmp_path: Path, counting: CountingEmbedder, monkeypatch: pytest.MonkeyPatch, renumber_slice: int
) -> None:
    """Also with the postings renumbered in slices smaller than a term's block, so the slice
    boundaries fall everywhere (the real slice is larger than this tree's postings)."""
    monkeypatch.setattr(lexical_merge, "_SLICE", renumber_slice)
    root = real_tree(tmp_path / "repo").resolve()
    manager = manager_for(tmp_path / "cache", counting)
    manager.update(root)
    edit_everywhere(root)
    stats = manager.update(root)
    assert (stats.added, stats.modified, stats.deleted, stats.touched) == (1, 3, 1, 1)
    fresh = manager_for(tmp_path / "fresh", CountingEmbedder(counting.inner))
    fresh.update(root)
    assert_same_index(manager.get(root), fresh.get(root))
    assert rankings(manager, root) == rankings(fresh, root)
    # and again on top of an updated generation: a second round of edits still matches
    table = root / "lib/index/chunk_table.py"
    table.write_text(table.read_text().replace("merged", "re-merged"))
    (root / "app/render.py").unlink()
    manager.update(root)
    fresh = manager_for(tmp_path / "fresh2", CountingEmbedder(counting.inner))
    fresh.update(root)
    assert_same_index(manager.get(root), fresh.get(root))


@pytest.mark.slow
def test_a_build_read_by_several_workers_equals_one_read_by_one(
    tmp_path: Path, counting: CountingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = real_tree(tmp_path / "repo").resolve()
    monkeypatch.setattr(indexing, "workers", lambda: 1)
    serial = manager_for(tmp_path / "serial", counting)
    serial.update(root)
    pools: list[object] = []

    class CountedPool(ProcessPoolExecutor):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            pools.append(self)

    monkeypatch.setattr(chunk_workers, "ProcessPoolExecutor", CountedPool)
    monkeypatch.setattr(chunk_jobs, "BATCH", 3)  # several batches in flight, results in order
    monkeypatch.setattr(indexing, "workers", lambda: 2)
    pooled = manager_for(tmp_path / "pooled", counting)
    stats = pooled.update(root)
    assert len(pools) == 1 and stats.files == len(serial.get(root).snapshot.files)  # type: ignore[union-attr]
    assert_same_index(pooled.get(root), serial.get(root))


def test_a_generation_held_open_reads_its_own_data_after_an_update(tmp_path: Path, counting: CountingEmbedder) -> None:
    root = real_tree(tmp_path / "repo").resolve()
    cache = tmp_path / "cache"
    writer = manager_for(cache, counting)
    writer.update(root)
    reader = manager_for(cache, counting)
    held = reader.get(root)
    reader.wait_idle(root, 120)  # its check of the tree, done before the edits
    before = [(c.path, c.content) for c in held.chunks]
    scores = held.lexical.scores(["pooled"])
    edit_everywhere(root)
    writer.update(root)
    assert writer.get(root).generation == held.generation + 1
    # the held generation is intact: its text (copied files and edited ones), vectors, postings
    assert held.snapshot is not None and held.snapshot.directory.is_dir()
    assert [(c.path, c.content) for c in held.chunks] == before
    assert any("Close every pooled connection." in text for _, text in before)
    np.testing.assert_array_equal(held.lexical.scores(["pooled"]), scores)
    best, _ = held.vectors.nearest(held.embed_query("pooled connection"), None, 3).ranked()
    assert best.size == len(held.chunks)  # a small index: every chunk rescored, read from the held files
    directory = held.snapshot.directory
    held.snapshot.release()
    assert not directory.exists()  # released and superseded: reclaimed


def test_per_file_postings_built_in_blocks_equal_those_built_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = real_tree(tmp_path / "repo")
    chunks = [c for p in sorted(root.rglob("*.py")) for c in
              chunk_file(p.relative_to(root).as_posix(), p.read_bytes(), "python")]  # fmt: skip
    whole = LexicalIndex.build(chunks).file_postings
    monkeypatch.setattr(lexical, "FILE_BLOCK", 7)  # many blocks, most cut short at a file's end
    blocks = LexicalIndex.build(chunks).file_postings
    assert len(chunks) > 200 and whole.size == blocks.size > 20
    for part in ("indptr", "docs", "tf", "lengths"):
        np.testing.assert_array_equal(getattr(blocks, part), getattr(whole, part))


KILLED_BUILD = textwrap.dedent("""\
    import sys, time
    from pathlib import Path
    import psutil
    sys.path.insert(0, sys.argv[3])
    import search_engine.chunking.jobs as chunk_jobs
    import search_engine.index.update as indexing
    from search_engine.config import EngineConfig
    from search_engine.index.manager import IndexManager

    def hold(phase, done, total):  # once the workers run: say who they are, then wait to be killed
        if phase == "embed":
            pids = [p.pid for p in psutil.Process().children(recursive=True)]
            print(" ".join(map(str, pids)), flush=True)
            time.sleep(600)

    if __name__ == "__main__":
        chunk_jobs.BATCH = 1
        indexing.workers = lambda: 2
        indexing.EMBED_BATCH = 8
        IndexManager(EngineConfig(cache_dir=Path(sys.argv[2]))).update(Path(sys.argv[1]), progress=hold)
""")


@pytest.mark.slow
def test_chunking_workers_end_with_an_indexer_killed_mid_build(tmp_path: Path) -> None:
    root = real_tree(tmp_path / "repo")
    proc = subprocess.Popen([sys.executable, "-c", KILLED_BUILD, str(root), str(tmp_path / "cache"), str(REPO)],
                            stdout=subprocess.PIPE, text=True, cwd=tmp_path)  # fmt: skip
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        pids = [int(p) for p in line.split()]
        assert len(pids) >= 3, line  # the forkserver and two workers
        assert all(psutil.pid_exists(p) for p in pids)
    finally:
        proc.kill()
        proc.wait(30)
    procs = []
    for pid in pids:
        try:
            procs.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            continue  # already gone
    _gone, alive = psutil.wait_procs(procs, timeout=30)
    assert not alive, f"left running after the indexer was killed: {[p.pid for p in alive]}"
