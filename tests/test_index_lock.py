"""The index writers' lock across processes: a writer that cannot get it in time gives up with
the engine's own error (what is going on, what to do), and leaves the index as it was."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from search_engine.config import EngineConfig
from search_engine.errors import IndexStoreError
from search_engine.index.manager import IndexManager


def test_a_writer_that_cannot_get_the_lock_gives_up_clearly(tmp_path: Path, static_embedder) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "jobs.py").write_text("def schedule(job):\n    return job\n")
    manager = IndexManager(EngineConfig(cache_dir=tmp_path / "cache"), static_embedder, lock_timeout_s=0.5)
    first = manager.update(repo)
    store = manager.store(repo.resolve())
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, time
            from search_engine.index.store import IndexStore
            with IndexStore({str(store.directory)!r}).lock(5):
                print("held", flush=True)
                sys.stdin.read()  # until the test closes our stdin
        """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        (repo / "more.py").write_text("def cancel(job):\n    return None\n")
        with pytest.raises(IndexStoreError, match=r"another process has been updating the index .* try again later"):
            manager.update(repo)
        manifest = store.read_manifest()
        assert manifest is not None and manifest.generation == first.generation  # untouched
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=10)
    after = manager.update(repo)  # the lock is free again: the waiting change goes in
    assert after.generation == first.generation + 1 and after.added == 1
