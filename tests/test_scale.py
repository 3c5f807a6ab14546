"""The index at scale, on small trees: a streamed build, the memory-mapped compact format,
quantization, opening an index without walking the tree first, and reclaiming superseded
generations (never one a live reader still has open). Real chunker, real model, real files."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import search_engine.chunking.jobs as chunk_jobs
import search_engine.files.discovery as files
import search_engine.index.store as index_store
import search_engine.index.update as indexing
from search_engine.config import EngineConfig
from search_engine.embedding.embedder import LazyEmbedder
from search_engine.engine import SearchEngine
from search_engine.index.vectors import RESCORE, VectorIndex, quantize
from search_engine.models import SearchMode, SearchRequest
from tests.index_helpers import (
    REPO,
    CountingEmbedder,
    block_the_walk,
    expected_chunks,
    manager_for,
)


def many_files(root: Path, n: int) -> Path:
    for i in range(n):
        path = root / f"pkg{i % 5}" / f"mod_{i:03d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"def handler_{i}(request):\n    return request.value + {i}\n\n\nclass Widget{i}:\n    size = {i}\n"
        )
    return root


# --- quantization -------------------------------------------------------------------------


def test_int8_codes_round_trip_within_a_quantization_step(static_embedder: LazyEmbedder) -> None:
    texts = [f"def function_{i}(x): return x * {i}  # scale {i}" for i in range(50)] + [""]
    vectors = static_embedder.embed(texts)
    codes, scales, words = quantize(vectors)
    back = codes.astype(np.float32) * scales[:, None]
    # each component within half a step of its own row's scale; the empty text stays zero
    assert np.all(np.abs(back - vectors) <= scales[:, None] / 2 + 1e-7)
    assert scales[-1] == 0 and not codes[-1].any()
    # cosines survive within a few thousandths
    query = vectors[3]
    assert np.abs(back @ query - vectors @ query).max() < 0.01
    # quantizing the dequantized vectors gives the same codes and sign bits (updates rely on it)
    again = quantize(back)
    np.testing.assert_array_equal(again[0], codes)
    np.testing.assert_array_equal(again[2], words)


def test_sign_bit_candidates_then_int8_rescoring_find_the_int8_top(static_embedder: LazyEmbedder) -> None:
    """Over more chunks than are rescored, candidates come from Hamming distance of sign bits;
    the top ten must still be the exact int8 top ten for queries drawn from the rows."""
    n = RESCORE * 3
    topics = ["sum", "parse", "render", "socket", "retry"]
    texts = [f"def op_{i}(a, b):\n    return a {'+-*/%'[i % 5]} b * {i % 97}  # {topics[i % 5]}" for i in range(n)]
    vectors = static_embedder.embed(texts)
    codes, scales, words = quantize(vectors)
    index = VectorIndex(codes, scales, np.ascontiguousarray(words.T), np.zeros((0, vectors.shape[1]), np.float32))
    everything = np.arange(n)
    for q in (5, 1234, 9000):
        query = static_embedder.embed([texts[q] + " variant"])[0]
        nearest = index.nearest(query, None, 10)
        assert len(nearest.ids) == RESCORE
        best, _ = nearest.ranked()
        exact = index.cosines(everything, query)
        assert sorted(best[:10].tolist()) == sorted(np.argsort(-exact, kind="stable")[:10].tolist())
        # every chunk has a value in the same order: the rescored ones their cosines, the
        # rest less, still rankable (hybrid adds 2.0)
        full = nearest.at(everything)
        np.testing.assert_array_equal(full[nearest.ids], nearest.cosines)
        assert np.argsort(-full, kind="stable")[:10].tolist() == best[:10].tolist()
        rest = np.setdiff1d(everything, nearest.ids)
        assert full[rest].max() < nearest.cosines.min() and full.min() > -1.6
        # the distances the sign-bit pass measured answer `at` as measuring them again does
        assert nearest.distances is not None
        np.testing.assert_array_equal(full, replace(nearest, distances=None).at(everything))
        odd = np.arange(n) % 2 == 1  # a filtered search keeps none: they cover the allowed chunks only
        filtered = index.nearest(query, odd, 10)
        assert filtered.distances is None and bool(odd[filtered.ids].all())


# --- the compact, memory-mapped index -----------------------------------------------------


def test_an_index_opens_by_memory_map_and_shows_text_from_its_compressed_store(
    repo: Path, tmp_path: Path, counting: CountingEmbedder
) -> None:
    manager_for(tmp_path / "cache", counting).update(repo)
    snapshot = manager_for(tmp_path / "cache", counting).store(repo).load()
    assert snapshot is not None
    arrays = (snapshot.chunks.rows, snapshot.vectors.codes, snapshot.vectors.scales, snapshot.vectors.words)
    for array in (*arrays, snapshot.lexical()._chunks.docs):
        # a plain ndarray over the mapping (a memmap subclass costs every slice a finalize)
        assert type(array) is np.ndarray and isinstance(array.base, np.memmap), type(array)
    assert [(c.path, c.content) for c in snapshot.chunks] == expected_chunks(repo)
    # text is stored compressed, not as the source's bytes
    text = (snapshot.directory / "chunks" / "text.bin").read_bytes()
    assert b"Retry a failing call" not in text
    snapshot.release()


def test_the_build_streams_embedding_batches_between_files(
    tmp_path: Path, counting: CountingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks are embedded and written batch by batch as files are read, not after every
    file has been chunked: the first batch is embedded before the last file is read."""
    root = many_files(tmp_path / "repo", 60)
    monkeypatch.setattr(indexing, "EMBED_BATCH", 16)
    events: list[str] = []
    real_next = chunk_jobs.ChunkStream.__next__
    real_embed = counting.embed

    def read(stream):  # the writer takes a file's chunks (read ahead by the chunking workers)
        result = real_next(stream)
        events.append("read")
        return result

    def embed(texts):
        events.append("embed")
        return real_embed(texts)

    monkeypatch.setattr(chunk_jobs.ChunkStream, "__next__", read)
    monkeypatch.setattr(counting, "embed", embed)
    stats = manager_for(tmp_path / "cache", counting).update(root)
    assert stats.files == 60 and stats.chunks == 120
    assert events.count("read") == 60
    assert events.count("embed") >= 120 // 16
    assert events.index("embed") < len(events) - 1 - events[::-1].index("read")
    index = manager_for(tmp_path / "cache", counting).get(root)
    assert [(c.path, c.content) for c in index.chunks] == expected_chunks(root)


# --- start-up without a walk --------------------------------------------------------------


def test_the_first_search_uses_the_index_on_disk_and_catches_up_in_the_background(
    repo: Path, tmp_path: Path, counting: CountingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    manager_for(cache, counting).update(repo)
    (repo / "app/render.py").write_text("def render_markdown(text):\n    return text.upper()\n")

    walking, release = block_the_walk(monkeypatch)
    engine = SearchEngine(EngineConfig(cache_dir=cache))
    engine._indexes = manager_for(cache, counting)
    request = SearchRequest(mode=SearchMode.HYBRID, query="render markdown", root=str(repo.resolve()), top_k=5)
    first = engine.search(request)  # answered while the walk is still blocked
    assert walking.wait(30) and not release.is_set()
    assert first.index_generation == 1
    assert not any("render_markdown" in m.content for m in first.matches)
    release.set()
    engine.indexes.wait_idle(repo, 120)
    later = engine.search(request)
    assert later.index_generation == 2
    assert "render_markdown" in later.matches[0].content


def test_the_first_search_during_the_start_up_check_does_not_walk_the_tree_again(
    repo: Path, tmp_path: Path, counting: CountingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server opens its index, then checks it against the tree (`update`, on the background
    indexer's thread); a search meanwhile starts the first full check of its own (a fold), which
    waits for the root's lock. Once the start-up check has brought everything in, that fold has
    nothing left to do: the tree is walked once, not twice."""
    cache = tmp_path / "cache"
    manager_for(cache, counting).update(repo)
    walks = []
    real_discover = files.discover

    def counted(*args: Any, **kwargs: Any) -> Any:
        walks.append(threading.current_thread().name)
        return real_discover(*args, **kwargs)

    monkeypatch.setattr(files, "discover", counted)
    walking, release = block_the_walk(monkeypatch)  # each walk is counted, then waits
    manager = manager_for(cache, counting, fresh_wait_s=0.05)
    assert manager.open(repo)
    start_up = threading.Thread(target=manager.update, args=(repo,))
    start_up.start()
    assert walking.wait(30)
    index, settled = manager.current(repo)  # the first search: its fold waits for the lock
    assert settled.state == "unverified" and index.generation == 1
    release.set()
    start_up.join(60)
    assert manager.wait_idle(repo, 60)
    assert len(walks) == 1
    assert manager.current(repo)[1].state == "current"
    manager.close()


# --- reclaiming generations ---------------------------------------------------------------

HOLDER = textwrap.dedent("""\
    import sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[3])
    from search_engine.index.store import IndexStore
    snapshot = IndexStore(Path(sys.argv[1])).load()
    print(snapshot.directory.name, flush=True)
    Path(sys.argv[2]).touch()
    sys.stdin.read()  # hold the generation open until told to exit
""")


def test_superseded_generations_are_reclaimed_but_never_one_still_open(
    repo: Path, tmp_path: Path, counting: CountingEmbedder
) -> None:
    cache = tmp_path / "cache"
    writer = manager_for(cache, counting)
    writer.update(repo)
    store = writer.store(repo)
    held = store.load()  # this process keeps generation 1 open
    assert held is not None and held.manifest.generation == 1

    ready = tmp_path / "ready"
    other = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(store.directory), str(ready), str(REPO)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "gen-00000001"
        (repo / "app/render.py").write_text("def render_markdown(text):\n    return text\n")
        assert writer.update(repo).generation == 2
        (repo / "app/render.py").write_text("def render_rst(text):\n    return text\n")
        assert writer.update(repo).generation == 3
        gens = sorted(n for n in os.listdir(store.directory) if n.startswith("gen-"))
        # 1 is open here and in the other process; 2 nobody holds (the writer's own manager
        # moved on to 3), so it went as soon as 3 was published
        assert gens == ["gen-00000001", "gen-00000003"]
        assert [c.symbol for c in held.chunks if c.path == "app/render.py"] == ["render_template"]

        held.release()  # still open in the other process: kept
        assert (store.directory / "gen-00000001").is_dir()
    finally:
        assert other.stdin is not None
        other.stdin.close()
        other.wait(60)
    # the other process was the last to hold it: letting go (at exit) reclaimed it
    assert store.reclaim() == []
    assert sorted(n for n in os.listdir(store.directory) if n.startswith("gen-")) == ["gen-00000003"]


def test_a_reader_dropping_the_last_reference_reclaims_its_generation(
    repo: Path, tmp_path: Path, counting: CountingEmbedder
) -> None:
    cache = tmp_path / "cache"
    reader = manager_for(cache, counting)
    first = reader.get(repo)
    assert first.generation == 1
    writer = manager_for(cache, counting)
    (repo / "app/render.py").write_text("def render_markdown(text):\n    return text\n")
    assert writer.update(repo).generation == 2
    store = writer.store(repo)
    assert (store.directory / "gen-00000001").is_dir()  # `first` still pins it
    assert reader.get(repo).generation == 2
    assert (store.directory / "gen-00000001").is_dir()  # `first` is still referenced here
    del first  # the last reference: its pin goes, and with it the generation
    assert sorted(n for n in os.listdir(store.directory) if n.startswith("gen-")) == ["gen-00000002"]
    assert index_store.IndexStore(store.directory).reclaim() == []


def test_symbols_and_text_round_trip_the_chunk_table_whatever_they_hold(tmp_path: Path) -> None:
    """A symbol spanning lines (a C++ operator, a macro), text with a NUL-free oddity and an
    empty file text all come back as written."""
    from search_engine.chunking.chunk import Chunk, content_hash
    from search_engine.index.chunk_table import ChunkTable, ChunkTableWriter, text_key

    def chunk(path: str, content: str, symbol: str | None) -> Chunk:
        return Chunk(path, "cpp", 1, 2, 0, len(content.encode()), content, "function", symbol, content_hash(content))

    chunks = [
        chunk("a.cpp", "bool operator()\n(int x) { return x; }", "operator\n()"),
        chunk("a.cpp", "int naïve = 1; // ünïcode", None),
        chunk("b.cpp", "", ""),
    ]
    writer = ChunkTableWriter(tmp_path)
    writer.add_file(chunks[:2], [text_key(c) for c in chunks[:2]])
    writer.add_file(chunks[2:], [text_key(c) for c in chunks[2:]])
    writer.finish()
    table = ChunkTable(tmp_path)
    assert list(table) == chunks
    _, _, names = table.definitions()
    assert "operator\n()" in names
    # Positions and slices as a list answers them (`ChunkSequence`), also when the table is
    # followed by the live files' chunks.
    from search_engine.ranking.corpus import _JoinedChunks

    for sequence in (table, _JoinedChunks(ChunkTable(tmp_path), chunks[:1])):
        as_list = list(sequence)
        assert [sequence[i] for i in range(-len(as_list), len(as_list))] == as_list + as_list
        assert sequence[1:] == as_list[1:] and sequence[::-2] == as_list[::-2]
        with pytest.raises(IndexError):
            sequence[len(as_list)]
        with pytest.raises(IndexError):
            sequence[-len(as_list) - 1]
