"""An index built and updated by the code itself is never judged damaged: the checks that find
a crafted generation (tests/test_crafted_index_*.py) must not rebuild an honest one on every
open. Found by a review of those checks: a model wider than 4,096 dimensions, and a tree of
empty files, were rebuilt (or failed) on every search."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from search_engine.config import EngineConfig
from search_engine.index import coarse
from search_engine.index.manager import IndexManager
from search_engine.ranking.search import Ranker
from tests.index_helpers import write_repo


def _repos(tmp: Path) -> dict[str, Path]:
    out = {}
    out["empty"] = tmp / "empty"
    out["empty"].mkdir()
    out["empty_plus_one"] = tmp / "empty_plus_one"
    out["empty_plus_one"].mkdir()
    (out["empty_plus_one"] / "a.py").write_text("")
    (out["empty_plus_one"] / "z.py").write_text("def z():\n    return 0\n")
    out["normal"] = write_repo(tmp / "normal")
    (out["normal"] / "trailing.py").write_text("def f():\n    return 1\n" + "\n" * 500 + "# end\n" + " \n" * 50)
    (out["normal"] / "empty.md").write_text("")
    many = tmp / "many"
    for i in range(1500):
        d = many / f"d{i % 30}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.py").write_text(f"def fn_{i}(x):\n    return x + {i}\n" if i % 3 else "")
    out["many"] = many
    return out


def _open_everything(manager: IndexManager, root: Path) -> None:
    store = manager.store(root)
    snap = store.load()
    assert snap is not None
    try:
        lexical = snap.lexical()
        index = manager.get(root)
        Ranker(index, manager.config)  # Corpus.build under reading()
        for chunk in snap.chunks:  # every file's text, decompressed within its reach
            assert chunk.path
        snap.chunks.definitions()
        assert lexical.size == len(snap.chunks)
    finally:
        snap.release()


@pytest.mark.slow
def test_honest_indexes_open_and_update_without_rebuild(tmp_path, static_embedder):
    for name, root in _repos(tmp_path).items():
        manager = IndexManager(EngineConfig(cache_dir=tmp_path / f"cache-{name}"), embedder=static_embedder,
                               )  # fmt: skip
        first = manager.update(root)
        assert first.rebuilt
        _open_everything(manager, root)
        again = manager.update(root)
        assert not again.rebuilt, (name, again.reason)
        # touched only: refresh_files rewrites files.msgpack in place
        for p in root.rglob("*"):
            if p.is_file():
                os.utime(p, ns=(p.stat().st_mtime_ns + 10**9,) * 2)
        touched = manager.update(root)
        assert not touched.rebuilt, (name, touched.reason)
        _open_everything(manager, root)
        # incremental: add, modify, delete
        (root / "new_file.py").write_text("def added():\n    return 'x'\n")
        files = sorted(p for p in root.rglob("*.py") if p.name != "new_file.py")
        if files:
            files[0].write_text(files[0].read_text() + "\ndef edited():\n    pass\n")
        if len(files) > 1:
            files[-1].unlink()
        inc = manager.update(root)
        assert not inc.rebuilt, (name, inc.reason)
        _open_everything(manager, root)
        final = manager.update(root)
        assert not final.rebuilt, (name, final.reason)


@pytest.mark.slow
def test_honest_index_with_coarse_lists(tmp_path, static_embedder, monkeypatch):
    monkeypatch.setattr(coarse, "MIN_CHUNKS", 100)
    root = _repos(tmp_path)["many"]
    manager = IndexManager(EngineConfig(cache_dir=tmp_path / "cache"), embedder=static_embedder)
    manager.update(root)
    snap = manager.store(root).load()
    assert snap is not None and snap.vectors.coarse is not None
    snap.release()
    (root / "more.py").write_text("def more():\n    return 2\n")
    assert not manager.update(root).rebuilt
    _open_everything(manager, root)
    assert not manager.update(root).rebuilt


class WideEmbedder:
    """The static embedder's vectors repeated to `dim` columns (a sentence-transformers model
    of that width: index.model accepts any); `asked` records every text embedded."""

    def __init__(self, inner, dim: int) -> None:
        self.inner, self.dim = inner, dim
        self.model_id = f"{inner.model_id}-wide{dim}"
        self.asked: list[str] = []

    def load(self):
        return self.inner.load()

    def embed(self, texts):
        self.asked += texts
        v = self.inner.embed(texts)
        reps = -(-self.dim // v.shape[1])
        w = np.tile(v, (1, reps))[:, : self.dim].astype(np.float32)
        n = np.linalg.norm(w, axis=1, keepdims=True)
        return w / np.where(n > 0, n, 1)


@pytest.mark.parametrize("dim", [4096, 4160, 8192])
def test_wide_model_index_is_not_rebuilt_on_every_update(tmp_path, static_embedder, dim):
    root = write_repo(tmp_path / "repo")
    manager = IndexManager(EngineConfig(cache_dir=tmp_path / "cache"), embedder=WideEmbedder(static_embedder, dim),
                           )  # fmt: skip
    assert manager.update(root).rebuilt
    again = manager.update(root)
    assert not again.rebuilt, again.reason


@pytest.mark.parametrize("files", [{"a.py": ""}, {"a.py": "\n\n  \n", "b.txt": ""}])
def test_tree_of_only_chunkless_files_indexes(tmp_path, static_embedder, files):
    """Before: a tree whose files have no chunks at all failed its first build (an
    AssertionError: nothing was embedded, so no width was known). Now it indexes, and an
    update finds it up to date."""
    root = tmp_path / "repo"
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text)
    manager = IndexManager(EngineConfig(cache_dir=tmp_path / "cache"), embedder=static_embedder)
    manager.update(root)
    assert not manager.update(root).rebuilt


def test_a_wide_model_index_is_searched_without_a_rebuild(tmp_path, static_embedder):
    """Before: the manifest check capped `dim` at 4,096, so with a 4,160-wide model every
    search embedded the whole tree twice (the build, then the repair) and still failed. Now
    the second search embeds only its query."""
    from search_engine import SearchMode, SearchRequest
    from search_engine.engine import SearchEngine

    root = write_repo(tmp_path / "repo")
    embedder = WideEmbedder(static_embedder, 4160)
    engine = SearchEngine(EngineConfig(cache_dir=tmp_path / "cache"))
    engine._indexes = IndexManager(engine.config, embedder=embedder)
    request = SearchRequest(mode=SearchMode.HYBRID, query="retry with backoff", root=str(root))
    assert engine.search(request).matches
    embedder.asked.clear()
    assert engine.search(request).matches
    assert embedder.asked == ["retry with backoff"]
