"""Read-your-writes for semantic and hybrid search, with a real watcher on a real tree and the
real model: every change completed before a call (an edit moving lines, a new file, a deletion,
a rename; made from another thread while searches run; made while no process watched) is in
that call's answer with the file's current lines, or the answer says it is not (`updating`,
`unverified`) and leaves the changed files out."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from search_engine.config import EngineConfig
from search_engine.engine import SearchEngine
from search_engine.index import IndexManager
from search_engine.models import Match, SearchMode, SearchRequest, SearchResult
from tests.index_helpers import block_the_walk, write_repo

pytestmark = pytest.mark.slow  # real index builds and a real watcher thread

MODES = (SearchMode.SEMANTIC, SearchMode.HYBRID)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return write_repo(tmp_path / "repo").resolve()


def engine_for(cache: Path, embedder: Any, **options: Any) -> SearchEngine:
    engine = SearchEngine(EngineConfig(cache_dir=cache))
    engine._indexes = IndexManager(engine.config, embedder=embedder, **options)
    return engine


@pytest.fixture
def engine(tmp_path: Path, static_embedder: Any) -> Iterator[SearchEngine]:
    engine = engine_for(tmp_path / "cache", static_embedder)
    yield engine
    engine.indexes.close()


def search(engine: SearchEngine, root: Path, query: str, mode: SearchMode = SearchMode.HYBRID) -> SearchResult:
    return engine.search(SearchRequest(mode=mode, query=query, root=str(root), top_k=20))


def true_to_disk(root: Path, match: Match) -> bool:
    """The match's text is the file's text at its bytes, and its lines are where those bytes are."""
    data = (root / match.path).read_bytes()
    return (
        data[match.byte_start : match.byte_end].decode() == match.content
        and data[: match.byte_start].count(b"\n") + 1 == match.line_start
    )


def hits(result: SearchResult, needle: str) -> list[Match]:
    return [m for m in result.matches if needle in m.content]


@pytest.mark.parametrize("mode", MODES)
def test_each_kind_of_change_is_in_the_very_next_search(engine: SearchEngine, tree: Path, mode: SearchMode) -> None:
    first = search(engine, tree, "retry with backoff", mode)
    assert first.freshness is not None and first.freshness.detection == "events"
    (before,) = [m for m in hits(first, "def retry_with_backoff") if m.path == "app/client.py"]

    client = tree / "app/client.py"  # 20 lines inserted at its top: every line below moves
    client.write_text("".join(f"# note {i}\n" for i in range(20)) + client.read_text())
    moved = search(engine, tree, "retry with backoff", mode)
    (after,) = [m for m in hits(moved, "def retry_with_backoff") if m.path == "app/client.py"]
    assert after.line_start == before.line_start + 20 and true_to_disk(tree, after)
    assert moved.freshness is not None and moved.freshness.state == "current"

    (tree / "app/zebra.py").write_text("def zebra_stripe_count(zebra):\n    return len(zebra.stripes)\n")
    added = search(engine, tree, "zebra_stripe_count", mode)
    assert [m.path for m in hits(added, "zebra_stripe_count")] == ["app/zebra.py"]
    assert all(true_to_disk(tree, m) for m in added.matches)

    (tree / "app/render.py").rename(tree / "app/templating.py")
    renamed = search(engine, tree, "render_template", mode)
    assert {m.path for m in hits(renamed, "def render_template")} == {"app/templating.py"}

    (tree / "app/templating.py").unlink()
    deleted = search(engine, tree, "render_template", mode)
    assert not hits(deleted, "def render_template")
    assert all(true_to_disk(tree, m) for m in deleted.matches)


def test_edits_from_a_thread_are_in_every_search_that_starts_after_them(engine: SearchEngine, tree: Path) -> None:
    """A writer rewrites a file over and over; each search must show at least the version whose
    write completed before the search began, at the line it is on now or later."""
    target = tree / "app/counter.py"
    target.write_text("def counter_version_0():\n    return 0\n")
    search(engine, tree, "counter_version")
    completed = [0]
    stop = threading.Event()

    def write() -> None:
        version = 0
        while not stop.is_set() and version < 400:
            version += 1
            padding = "\n" * (version % 7)  # the function moves down and up
            # Saved as editors do (a new file renamed over the old): no half-written state.
            staged = tree / "app/.counter.py.swp"
            staged.write_text(f"{padding}def counter_version_{version}():\n    return {version}\n")
            staged.replace(target)
            completed[0] = version

    writer = threading.Thread(target=write)
    writer.start()
    try:
        checked = 0
        while writer.is_alive() and checked < 15:
            floor = completed[0]
            result = search(engine, tree, "counter_version")
            seen = [int(m.content.split("counter_version_")[1].split("(")[0]) for m in hits(result, "counter_version_")]
            assert result.freshness is not None
            if result.freshness.state == "current":
                assert seen and max(seen) >= floor
            else:  # a fold still running after the wait: the file is left out, never shown stale
                assert "app/counter.py" in result.freshness.pending and not seen
            checked += 1
    finally:
        stop.set()
        writer.join()
    final = search(engine, tree, "counter_version")
    (last,) = hits(final, "counter_version_")
    assert f"counter_version_{completed[0]}" in last.content and true_to_disk(tree, last)


def test_a_burst_answers_at_once_leaving_out_what_is_not_folded_in(
    tmp_path: Path, tree: Path, static_embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkout rewriting many files while the fold cannot finish: the search answers after
    the bound (0 here) marked `updating`, with the changed files left out and counted; once the
    fold ends, everything is in."""
    engine = engine_for(tmp_path / "cache", static_embedder, fresh_wait_s=0.0)
    try:
        search(engine, tree, "retry with backoff")
        walking, release = block_the_walk(monkeypatch)
        branch = tree / "branch"
        branch.mkdir()
        for i in range(60):
            (branch / f"mod_{i}.py").write_text(f"def burst_handler_{i}(event):\n    return event.value + {i}\n")
        client = tree / "app/client.py"
        client.write_text("\n\n" + client.read_text())
        during = search(engine, tree, "retry with backoff")
        assert during.freshness is not None and during.freshness.state == "updating"
        assert during.freshness.pending_count >= 2 and "app/client.py" in during.freshness.pending
        assert not [m for m in during.matches if m.path == "app/client.py" or m.path.startswith("branch/")]
        assert walking.wait(60)  # the fold is running, held
        release.set()
        assert engine.indexes.wait_idle(tree, 120)
        after = search(engine, tree, "burst_handler_17")
        assert after.freshness is not None and after.freshness.state == "current"
        assert any(m.path == "branch/mod_17.py" for m in after.matches)
        assert all(true_to_disk(tree, m) for m in after.matches)
    finally:
        engine.indexes.close()


def test_forced_polling_sees_every_change_and_says_how(tmp_path: Path, tree: Path, static_embedder: Any) -> None:
    engine = engine_for(tmp_path / "cache", static_embedder, watch=False)
    try:
        search(engine, tree, "render template")
        (tree / "app/render.py").write_text("\n" * 5 + "def render_quilt(patches):\n    return patches\n")
        result = search(engine, tree, "render_quilt")
        assert result.freshness is not None
        assert (result.freshness.state, result.freshness.detection) == ("current", "polling")
        assert result.freshness.reason == "index.watch is off"
        (match,) = hits(result, "def render_quilt")
        assert match.line_start == 6 and true_to_disk(tree, match)
        status = engine.indexes.status(tree)
        assert (status.change_detection, status.change_detection_reason) == ("polling", "index.watch is off")
    finally:
        engine.indexes.close()


def test_changes_made_while_no_process_watched_are_in_the_first_search(
    tmp_path: Path, tree: Path, static_embedder: Any
) -> None:
    first = engine_for(tmp_path / "cache", static_embedder)
    search(first, tree, "retry with backoff")
    first.indexes.close()  # the server stops
    (tree / "app/render.py").write_text("def render_while_down(page):\n    return page\n")
    restarted = engine_for(tmp_path / "cache", static_embedder)
    try:
        result = search(restarted, tree, "render_while_down")
        assert result.freshness is not None and result.freshness.state == "current"
        assert [m.path for m in hits(result, "render_while_down")] == ["app/render.py"]
    finally:
        restarted.indexes.close()


def test_hidden_and_ignored_churn_needs_no_fold(engine: SearchEngine, tree: Path) -> None:
    """`.git/` changes on every commit and is never indexed: the watcher does not count it."""
    search(engine, tree, "retry with backoff")
    live = engine.indexes._live[tree]
    assert live.watcher is not None
    seq = live.watcher.barrier()
    (tree / ".git").mkdir()
    (tree / ".git/index").write_bytes(b"\0" * 64)
    assert live.watcher.barrier() == seq
    (tree / ".gitignore").write_text("build/\n")  # changes what is listed: its directory counts
    assert live.watcher.barrier() == (seq or 0) + 1
    assert live.watcher.changed_after(seq or 0) == (frozenset({""}), False)
