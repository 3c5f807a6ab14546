"""Environment faults the server must survive without a restart: an offload dir that cannot be
written (pages fall back to inline, cut losslessly, with a warning) and an index/cache dir that
cannot be written (the server still starts and regex search works; semantic search says
clearly what is wrong); a server stopped with SIGTERM in the middle of indexing (the index is
still the previous generation, or none, and the next `codepager index` finishes the job); files
edited, added and deleted while an update runs. Redis going away is in test_replicas.py. The
directories are made unusable by putting them under a regular file: the tests run as root, which
chmod does not stop."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness.commands import codepager_cmd
from harness.http_server import HttpServer
from search_engine.chunking.chunker import chunk_file
from search_engine.config import EngineConfig
from search_engine.files.languages import language_for
from search_engine.index.manager import IndexManager
from search_engine.index.store import IndexStore, Snapshot, index_dir
from server.app import build_app
from tests.code_tree import write_code_tree
from tests.hostile_helpers import SyncClient
from tests.server_helpers import make_settings, page_matches, serve_env, structured


@pytest.fixture
def blocked(tmp_path):
    blocker = tmp_path / "a-regular-file"
    blocker.write_text("not a directory\n")
    return blocker


def test_an_unwritable_offload_dir_falls_back_to_inline_pages_that_lose_nothing(tmp_path, blocked):
    root = write_code_tree(tmp_path / "repo")
    sync = SyncClient(build_app(make_settings(root, tmp_path, offload={"output_dir": blocked / "offload"})))
    try:
        body = structured(sync.call("regex_search", {"pattern": "needle", "output_mode": "file_ref", "page_size": 100}))
        assert body["results"]["mode"] == "inline"
        assert any("could not be offloaded" in w and "offload" in w for w in body["metadata"]["warnings"])
        seen = page_matches(body)
        while (cursor := body["pagination"]["next_cursor"]) is not None:
            body = structured(sync.call("regex_search", {"cursor": cursor, "output_mode": "file_ref"}))
            seen += page_matches(body)
        assert len(seen) == 240
        assert len({(m["path"], m["line"]) for m in seen}) == 240
    finally:
        sync.close()


def test_an_unwritable_cache_dir_keeps_regex_working_and_semantic_says_why(tmp_path, blocked, caplog):
    root = write_code_tree(tmp_path / "repo")
    settings = make_settings(root, tmp_path, index={"cache_dir": blocked / "cache"}, sessions={"secret_key": None})
    with caplog.at_level(logging.WARNING, logger="codepager"):
        sync = SyncClient(build_app(settings))  # no secret key configured and nowhere to keep one
    try:
        assert "cursors will not survive a restart" in caplog.text
        walked = structured(sync.call("regex_search", {"pattern": "needle", "page_size": 200}))
        rest = structured(sync.call("regex_search", {"cursor": walked["pagination"]["next_cursor"]}))
        assert len(page_matches(walked)) + len(page_matches(rest)) == 240

        result = sync.call("hybrid_search", {"query": "needle function"}, raise_on_error=False)
        assert result.is_error
        error = result.structured_content["error"]
        assert error["code"] in ("index_unavailable", "model_unavailable"), error
        assert "cache" in error["message"] and "regex_search still works" in error["hint"]
        status = structured(sync.call("index_status", {}))
        assert status["error"] and not status["building"]
    finally:
        sync.close()


# -- indexing interrupted or racing edits ---------------------------------------------------


def cache_dir(tmp: Path) -> Path:
    """`tmp/cache`, the cache dir serve_env points servers at."""
    cache = tmp / "cache"
    cache.mkdir()
    return cache


def codepager_index(env: dict[str, str], *args: str) -> dict[str, Any]:
    cmd, pre = codepager_cmd()
    out = subprocess.run(
        [cmd, *pre, "index", "--json", "--no-progress", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    stats: dict[str, Any] = json.loads(out.stdout)
    return stats


async def wait_until_embedding(server: HttpServer, timeout_s: float = 300) -> dict[str, Any]:
    """The server's index_status once a first batch of a build has been embedded."""
    deadline = time.monotonic() + timeout_s
    async with server.client(timeout=60) as client:
        while time.monotonic() < deadline:
            status = structured(await client.call_tool("index_status", {}))
            progress = status["progress"]
            if progress["phase"] == "embed" and 0 < progress["done"] < progress["total"]:
                return status
            assert status["building"] or not status["exists"] or status["generation"] < 2, "built before the signal"
            await asyncio.sleep(0.03)
    raise TimeoutError("indexing never reached the embed phase")


def assert_index_matches_the_tree(snapshot: Snapshot | None, root: Path) -> None:
    """Every indexed file exists with the content hash recorded, every file is indexed, and the
    chunks (and one vector each) are exactly those of the files as they are now."""
    assert snapshot is not None
    files = sorted(p for p in root.rglob("*") if p.is_file())
    rel = {p.relative_to(root).as_posix(): p for p in files}
    assert set(snapshot.files) == set(rel)
    for name, entry in snapshot.files.items():
        assert entry.digest == hashlib.blake2b(rel[name].read_bytes(), digest_size=16).hexdigest(), name
    expected = [
        (c.path, c.content) for n, p in sorted(rel.items()) for c in chunk_file(n, p.read_bytes(), language_for(n))
    ]
    assert sorted((c.path, c.content) for c in snapshot.chunks) == sorted(expected)
    assert snapshot.vectors.shape[0] == len(snapshot.chunks)


@pytest.mark.slow
@pytest.mark.parametrize("before", ["no index", "generation 1"])
def test_sigterm_mid_indexing_keeps_the_last_generation_and_the_next_run_finishes(tmp_path, before):
    """`codepager serve` indexing on start gets SIGTERM between embedding batches: it exits
    promptly and cleanly, the index on disk is the previous generation (or none), and the next
    `codepager index` completes from it (re-embedding only the edited files)."""
    root = write_code_tree(tmp_path / "repo", files=1500, hits_per_file=20)  # 31,501 chunks
    cache = cache_dir(tmp_path)
    env = serve_env(tmp_path)
    edited = 0
    if before == "generation 1":
        assert codepager_index(env, str(root))["generation"] == 1
        for path in sorted(root.rglob("mod*.py"))[::3]:
            path.write_text(path.read_text().replace("return x +", "return x -"))
            edited += 1
    server = HttpServer(root, serve_env(tmp_path, index__index_on_start="true")).start()
    try:
        asyncio.run(wait_until_embedding(server))
        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(timeout=60)  # not stuck finishing the build
    finally:
        stderr = server.stop()
    assert "Traceback" not in stderr and "terminate called" not in stderr, stderr[-3000:]
    store = IndexStore(index_dir(cache, root))
    snapshot = store.load()
    if before == "no index":
        assert snapshot is None
    else:
        assert snapshot is not None and snapshot.manifest.generation == 1
        assert not any("return x -" in c.content for c in snapshot.chunks)  # none of the edits
        assert snapshot.vectors.shape[0] == len(snapshot.chunks) == 31_501

    resumed = codepager_index(env, str(root))
    if before == "no index":
        assert resumed["rebuilt"] and resumed["chunks"] == 31_501
    else:
        assert not resumed["rebuilt"] and resumed["modified"] == edited and resumed["generation"] == 2
        assert resumed["chunks_embedded"] < resumed["chunks"] / 2
    assert_index_matches_the_tree(store.load(), root)
    cmd, pre = codepager_cmd()
    found = subprocess.run(
        [cmd, *pre, "search", "--hybrid", "needle_1234_7", "--jsonl", "--top-k", "3"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    top = json.loads(found.stdout.splitlines()[0])
    assert top["path"] == "lib/mod1234.py" and "needle_1234_7" in top["text"]


class TreeMutator(threading.Thread):
    """Edits (same size and growing), adds and deletes files under `root` until stopped,
    counting what it did while `busy` was set."""

    def __init__(self, root: Path, seed: int) -> None:
        super().__init__(name="tree-mutator", daemon=True)
        self.root, self.rnd = root, random.Random(seed)
        self.stop, self.busy = threading.Event(), threading.Event()
        self.ops_while_busy = 0
        self.added = 0

    def run(self) -> None:
        while not self.stop.is_set():
            files = sorted(self.root.rglob("mod*.py"))
            path = self.rnd.choice(files)
            op = self.rnd.choice(["same-size edit", "append", "add", "delete"])
            if op == "same-size edit":
                path.write_text(path.read_text().replace("return x + 1", "return x - 1", 1))
            elif op == "append":
                path.write_text(path.read_text() + f"def appended_{self.rnd.randrange(10**6)}(y):\n    return y\n")
            elif op == "add":
                self.added += 1
                (self.root / "new" / f"added{self.added}.py").write_text(
                    f"def added_{self.added}():\n    return {self.added}\n"
                )
            elif len(files) > 50:
                path.unlink()
            if self.busy.is_set():
                self.ops_while_busy += 1
            time.sleep(self.rnd.uniform(0, 0.004))


@pytest.mark.slow
def test_files_changing_during_an_update_do_not_break_it_and_the_next_update_converges(tmp_path, static_embedder):
    root = write_code_tree(tmp_path / "repo", files=300, hits_per_file=20)
    (root / "new").mkdir()
    cache = cache_dir(tmp_path)
    manager = IndexManager(EngineConfig(cache_dir=cache), embedder=static_embedder)
    manager.update(root)
    for path in root.rglob("mod*.py"):  # every file must be read again: a long update
        path.write_text(path.read_text().replace("# needle", "# pin"))
    mutator = TreeMutator(root, seed=7)
    mutator.start()
    try:
        mutator.busy.set()
        racing = manager.update(root)
        mutator.busy.clear()
    finally:
        mutator.stop.set()
        mutator.join(10)
    assert racing.changed and mutator.ops_while_busy > 20
    manager.update(root)  # the tree is still now: this one must catch up with everything
    assert_index_matches_the_tree(manager.store(root).load(), root)
    assert manager.update(root).changed is False
