"""The coarse quantizer of large indexes (`search_engine.index.coarse`), on a small real tree with the
size thresholds lowered so the approximate path runs: it finds what an exhaustive int8 scan
finds, survives an incremental update (unchanged chunks keep their lists, new ones join the
nearest), and a damaged one is refused. Real chunker, real model, real files."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from search_engine.config import EngineConfig
from search_engine.errors import IndexStoreError
from search_engine.index import coarse, vectors
from search_engine.index.manager import Index, IndexManager
from search_engine.index.store import IndexStore

TOPICS = [
    "parse the configuration file",
    "retry the request with backoff",
    "render an html template",
    "open a database connection",
    "compress the log archive",
    "validate the user password",
    "resize the image thumbnail",
    "schedule the nightly job",
    "encode the json payload",
    "hash the file contents",
    "send the email notification",
    "cache the query result",
]
VERBS = ["load", "check", "build", "merge", "split", "count", "sort", "store", "fetch", "clean"]


def topical_tree(root: Path, files: int) -> Path:
    """`files` modules of two functions each, on a dozen topics in varied words."""
    for i in range(files):
        topic, verb = TOPICS[i % len(TOPICS)], VERBS[(i // len(TOPICS)) % len(VERBS)]
        words = topic.split()
        path = root / f"pkg{i % 7}" / f"{words[-1]}_{i:03d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f'def {verb}_{words[-1]}_{i}(source):\n    """{verb.title()} and {topic}."""\n'
            f"    return source.{words[0]}({i}, mode='{verb}')\n\n\n"
            f'class {words[-1].title()}{verb.title()}{i}:\n    """Keeps the {words[-1]} for {topic} #{i}."""\n'
            f"    limit = {i * 3 % 17}\n"
        )
    return root


@pytest.fixture
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A few hundred chunks behave like a large index: a coarse quantizer is built, and a
    query probes lists for ~40% of the chunks and rescores 60 of them."""
    monkeypatch.setattr(coarse, "MIN_CHUNKS", 100)
    monkeypatch.setattr(coarse, "PROBE_CHUNKS", 200)
    monkeypatch.setattr(vectors, "RESCORE", 60)


def test_the_coarse_path_finds_the_exhaustive_top_results(tmp_path: Path, static_embedder, small_thresholds) -> None:
    root = topical_tree(tmp_path / "tree", 240)
    manager = IndexManager(EngineConfig(cache_dir=tmp_path / "cache"), embedder=static_embedder)
    manager.update(root)
    index = manager.get(root)
    n = len(index.chunks)
    assert n >= 400 and index.vectors.coarse is not None
    assert len(index.vectors.coarse.centroids) == coarse.list_count(n)
    exhaustive = replace(index.vectors, coarse=None)
    everything = np.arange(n)
    recall = []
    for query in [*TOPICS, "Keeps the payload for encode the json payload #20", "which function fetches an archive"]:
        q = index.embed_query(query)
        pool = index.vectors.coarse.probe(q, None, coarse.PROBE_CHUNKS)
        assert coarse.PROBE_CHUNKS <= len(pool) < n  # the approximate path ran, on part of the index
        got = index.vectors.nearest(q, None, 10).ranked()[0][:10]
        exact = exhaustive.cosines(everything, q)
        best = np.lexsort((everything, -exact))[:10]
        # the same top three (ties of equal cosines may swap places), nearly the same top ten
        assert np.isin(got[:3], np.flatnonzero(exact >= exact[best[2]] - 1e-6)).all()
        recall.append(np.isin(got, np.flatnonzero(exact >= exact[best[-1]] - 1e-6)).mean())
    assert np.mean(recall) >= 0.9
    # a path filter applies to the probed chunks too
    allowed = np.zeros(n, dtype=bool)
    allowed[::3] = True
    q = index.embed_query(TOPICS[0])
    filtered = index.vectors.nearest(q, allowed, 10).ranked()[0]
    assert allowed[filtered].all() and filtered[0] == np.flatnonzero(allowed)[np.argmax(exact_of(index, q)[allowed])]


def exact_of(index: Index, q: np.ndarray) -> np.ndarray:
    return index.vectors.cosines(np.arange(len(index.chunks)), q)


def test_the_coarse_index_survives_an_incremental_update(tmp_path: Path, static_embedder, small_thresholds) -> None:
    root = topical_tree(tmp_path / "tree", 240)
    manager = IndexManager(EngineConfig(cache_dir=tmp_path / "cache"), embedder=static_embedder)
    manager.update(root)
    before = manager.get(root)
    trained = before.vectors.coarse
    assert trained is not None  # 240 files are past the lowered threshold: the index is coarse
    old_keys = {int(k): int(lst) for k, lst in zip(before.chunks.rows["text_hash"], trained.lists, strict=True)}
    old_centroids = np.array(trained.centroids)

    (root / "pkg0" / "file_000.py").unlink()
    edited = root / "pkg1" / "backoff_001.py"
    edited.write_text(
        edited.read_text()
        + '\n\ndef jitter_delay(attempt):\n    """Random jitter between retries."""\n    return attempt * 0.1\n'
    )
    (root / "pkg9").mkdir()
    (root / "pkg9" / "geometry.py").write_text(
        'def polygon_area(points):\n    """Area of a polygon by the shoelace formula."""\n'
        "    return abs(sum(x0 * y1 - x1 * y0 for (x0, y0), (x1, y1) in zip(points, points[1:] + points[:1]))) / 2\n"
    )
    manager.update(root)
    after = manager.get(root)
    assert after.generation == before.generation + 1
    fresh = after.vectors.coarse
    assert fresh is not None and len(fresh.lists) == len(after.chunks)
    np.testing.assert_array_equal(fresh.centroids, old_centroids)  # kept, not trained again
    keys = after.chunks.rows["text_hash"]
    kept = np.array([int(k) in old_keys for k in keys])
    assert kept.sum() >= len(keys) - 3 and not kept.all()
    # unchanged chunks keep their list; new ones join the list of their nearest centroid
    assert all(fresh.lists[i] == old_keys[int(keys[i])] for i in np.flatnonzero(kept))
    new = np.flatnonzero(~kept)
    np.testing.assert_array_equal(
        fresh.lists[new], coarse.nearest_lists(np.asarray(after.vectors.codes[new]), fresh.centroids)
    )
    # and the new function is found through the coarse path
    q = after.embed_query("polygon_area: area of a polygon by the shoelace formula")
    hit = after.vectors.nearest(q, None, 10).ranked()[0][0]
    assert hit == np.argmax(after.vectors.cosines(np.arange(len(after.chunks)), q))
    assert after.chunks[int(hit)].path == "pkg9/geometry.py"


def test_a_coarse_index_that_disagrees_with_its_vectors_is_refused(
    tmp_path: Path, static_embedder, small_thresholds, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = topical_tree(tmp_path / "tree", 240)
    manager = IndexManager(EngineConfig(cache_dir=tmp_path / "cache"), embedder=static_embedder)
    manager.update(root)
    store = manager.store(root)
    name = store.current_name()
    assert name is not None  # the update above published a generation
    generation = store.directory / name
    lists = np.load(generation / "coarse.lists.npy")
    np.save(generation / "coarse.lists.npy", np.full_like(lists, 10**6))  # lists that do not exist
    with pytest.raises(IndexStoreError, match="coarse index"):
        IndexStore(store.directory).load()
    np.save(generation / "coarse.lists.npy", lists[:-1])  # one chunk short
    with pytest.raises(IndexStoreError, match="coarse index"):
        IndexStore(store.directory).load()
    # below the threshold no coarse index is written and search is exhaustive
    monkeypatch.setattr(coarse, "MIN_CHUNKS", 10**9)
    manager.update(root, full=True)
    assert manager.get(root).vectors.coarse is None
