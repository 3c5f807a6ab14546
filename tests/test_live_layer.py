"""The live layer with a real watcher, a real tree and the real model: while the fold of an edit
cannot finish (its tree walk is held), the very next search already answers from the edited
files (`current`), ranks them as a freshly built index of the same files would, never reuses
such an answer as a generation's, and leaves out a new file discovery would not index."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest

from search_engine.chunking.workers import chunking_pool
from search_engine.engine import SearchEngine
from search_engine.models import SearchMode, SearchRequest
from search_engine.ranking.search import Ranker
from tests.index_helpers import block_the_walk, write_repo
from tests.live_helpers import engine_for, hits, search, true_to_disk

pytestmark = pytest.mark.slow  # real index builds and the model

EXTRA = {
    "app/retry.py": "def retry_policy(attempts):\n    '''How many times to retry a call.'''\n    return attempts\n",
    "app/session.py": "class SessionPool:\n    '''Pooled HTTP sessions kept alive.'''\n\n    def close(self):\n"
    "        return None\n",
    "docs/guide.md": "# Retrying\n\nCalls are retried with exponential backoff.\n",
}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = write_repo(tmp_path / "repo").resolve()
    for rel, text in EXTRA.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / ".ignore").write_text("secret_*.py\n")  # not a git checkout: a .gitignore would not apply
    return root


@pytest.fixture
def held(
    tmp_path: Path, tree: Path, static_embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[SearchEngine, threading.Event]]:
    """An engine whose index is built, then whose folds are held at their tree walk; it
    never waits for a fold (`fresh_wait_s` 0)."""
    engine = engine_for(tmp_path / "cache", static_embedder, fresh_wait_s=0.0)
    search(engine, tree, "retry with backoff")
    walking, release = block_the_walk(monkeypatch)
    try:
        yield engine, walking
    finally:
        release.set()
        engine.indexes.wait_idle(tree, 60)
        engine.indexes.close()


def edit(tree: Path) -> None:
    client = tree / "app/client.py"
    client.write_text(
        "".join(f"# note {i}\n" for i in range(20))
        + client.read_text()
        + "\n\ndef jittered_backoff_delay(attempt):\n    '''Backoff delay with random jitter.'''\n"
        "    return 2 ** attempt\n"
    )
    (tree / "app/pool.py").write_text("def connection_pool_size(limit):\n    return max(1, limit)\n")
    (tree / "app/render.py").unlink()


def test_an_edit_is_in_the_next_search_while_its_fold_is_held(
    held: tuple[SearchEngine, threading.Event], tree: Path
) -> None:
    engine, walking = held
    edit(tree)
    for mode in (SearchMode.SEMANTIC, SearchMode.HYBRID):
        result = search(engine, tree, "jittered_backoff_delay", mode)
        assert result.freshness is not None and result.freshness.state == "current"
        assert result.freshness.pending_count == 0
        (found,) = hits(result, "def jittered_backoff_delay")
        assert found.path == "app/client.py"
        assert all(true_to_disk(tree, m) for m in result.matches)
        assert not [m for m in result.matches if m.path == "app/render.py"]
    moved = search(engine, tree, "retry_with_backoff")
    (retry,) = hits(moved, "def retry_with_backoff")
    assert retry.line_start > 20 and true_to_disk(tree, retry)  # below the 20 lines inserted
    added = search(engine, tree, "connection_pool_size")
    assert [m.path for m in hits(added, "connection_pool_size")] == ["app/pool.py"]
    assert walking.wait(60)  # the fold runs, held in its walk: no answer above came from it
    request = SearchRequest(mode=SearchMode.HYBRID, query="retry", root=str(tree))
    assert engine.generation(request) is None  # such an answer is no generation's: never reused


def test_a_new_file_discovery_would_not_index_stays_out(held: tuple[SearchEngine, threading.Event], tree: Path) -> None:
    engine, _ = held
    (tree / "app/secret_tokens.py").write_text("def leaked_api_token():\n    return 'x'\n")
    (tree / "app/public_tokens.py").write_text("def public_api_token():\n    return 'y'\n")
    result = search(engine, tree, "api_token")
    assert result.freshness is not None and result.freshness.state == "current"
    assert {m.path for m in result.matches} >= {"app/public_tokens.py"}
    assert "app/secret_tokens.py" not in {m.path for m in result.matches}


@pytest.mark.parametrize("mode", [SearchMode.SEMANTIC, SearchMode.HYBRID])
def test_the_live_ranking_is_a_fresh_index_ranking(
    held: tuple[SearchEngine, threading.Event],
    tree: Path,
    tmp_path: Path,
    static_embedder: Any,
    mode: SearchMode,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import search_engine.files.discovery as files
    import search_engine.index.update as indexing

    engine, walking = held
    edit(tree)
    search(engine, tree, "retry", mode)
    assert walking.wait(60)  # the live engine's fold is held in its walk
    monkeypatch.setattr(indexing, "discover", files.discover)  # a fresh index builds at once
    fresh = engine_for(tmp_path / "fresh-cache", static_embedder)
    try:
        for query in ("retry with backoff", "jittered_backoff_delay", "connection pool", "close the session"):
            live = search(engine, tree, query, mode)
            built = search(fresh, tree, query, mode)
            assert [(m.path, m.line_start) for m in live.matches[:5]] == [
                (m.path, m.line_start) for m in built.matches[:5]
            ], query
    finally:
        fresh.indexes.close()


def test_a_joined_corpus_lists_each_files_chunks(held: tuple[SearchEngine, threading.Event], tree: Path) -> None:
    """The corpus a search with live files ranks (the generation's joined to theirs) gathers,
    for any files, exactly the chunks `file_of` says are theirs, the live files' included."""
    engine, walking = held
    edit(tree)
    search(engine, tree, "retry")
    assert walking.wait(60)
    index, settled = engine.indexes.current(tree)
    assert settled.live
    base = index.memo("ranker", partial(Ranker, index, engine.config))
    corpus = engine.indexes.layer(tree).ranker(base, settled.live).corpus
    assert len(corpus.files) > len(base.corpus.files)
    every = np.arange(len(corpus.files))
    expected = [np.flatnonzero(corpus.file_of == f) for f in every.tolist()]
    assert np.array_equal(corpus.file_chunks.gather(every), np.concatenate(expected))
    odd = every[1::2]
    assert np.array_equal(corpus.file_chunks.gather(odd), np.concatenate([expected[f] for f in odd.tolist()]))


def test_edits_are_chunked_by_the_worker_kept_for_them(
    held: tuple[SearchEngine, threading.Event], tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each search that takes an edit live has it chunked by the one worker kept running since
    the root was watched: no pool is started per edit (10-40 ms each, more on a busy machine)."""
    import search_engine.chunking.jobs as jobs

    engine, _ = held
    retry = tree / "app/retry.py"

    def edit_and_find(n: int) -> None:
        retry.write_text(f"def retry_policy_{n}(attempts):\n    return attempts + {n}\n")
        result = search(engine, tree, f"retry_policy_{n}")
        assert result.freshness is not None and result.freshness.state == "current"
        assert [m.path for m in hits(result, f"def retry_policy_{n}")] == ["app/retry.py"]

    edit_and_find(0)  # the kept worker is running by now
    started: list[int] = []

    def counted_pool(workers: int) -> ProcessPoolExecutor:
        started.append(workers)
        return chunking_pool(workers)

    monkeypatch.setattr(jobs, "chunking_pool", counted_pool)
    for n in range(1, 4):
        edit_and_find(n)
    assert started == []


def test_a_parse_bomb_taken_live_is_plain_text_and_the_next_edit_is_chunked(
    held: tuple[SearchEngine, threading.Event], tree: Path
) -> None:
    """A file whose parse would take gigabytes, saved while its fold cannot run: the kept worker
    dies on it at its memory limit, the file is searched as plain text at once, and a new worker
    chunks the next edit by structure."""
    engine, _ = held
    (tree / "app/Bomb.java").write_bytes(b"// zebra quasar marker\n" + b"a<" * 16368)
    bomb = search(engine, tree, "zebra quasar marker")
    assert bomb.freshness is not None and bomb.freshness.state == "current"
    assert [m.path for m in hits(bomb, "zebra quasar marker")] == ["app/Bomb.java"]
    (tree / "app/retry.py").write_text("def retry_after_bomb(attempts):\n    return attempts\n")
    after = search(engine, tree, "retry_after_bomb")
    (found,) = hits(after, "def retry_after_bomb")
    assert found.path == "app/retry.py" and found.line_start == 1 and true_to_disk(tree, found)


def _forked_workers() -> list[psutil.Process]:
    """This process's grandchildren: the processes its forkserver forked (chunking workers).
    One that ends between the listing and the question (an earlier test's worker exiting) is
    not one: asking its parent then raised NoSuchProcess (seen once in a CI run)."""
    me = psutil.Process()
    workers = []
    for process in me.children(recursive=True):
        try:
            if process.ppid() != me.pid:
                workers.append(process)
        except psutil.NoSuchProcess:
            continue
    return workers


def test_the_kept_worker_ends_with_its_index_manager(tmp_path: Path, tree: Path, static_embedder: Any) -> None:
    """An engine dropped without `close` (a test, a server's reload) leaves no worker running:
    the kept worker's pool ends its process once the pool is collected with the manager."""
    before = {p.pid for p in _forked_workers()}
    engine = engine_for(tmp_path / "cache", static_embedder)
    search(engine, tree, "retry with backoff")
    (tree / "app/retry.py").write_text("def retry_policy_kept(attempts):\n    return attempts\n")
    assert hits(search(engine, tree, "retry_policy_kept"), "def retry_policy_kept")  # chunked by the kept worker
    kept = [p for p in _forked_workers() if p.pid not in before]
    assert kept
    assert engine.indexes.wait_idle(tree, 60)
    del engine
    gc.collect()
    _, alive = psutil.wait_procs(kept, timeout=30)
    assert not alive
