"""Index parts that are not regular files, and a `CURRENT` that leads out of the index dir.
Whoever can write in the cache dir (a repository that commits it, when `index.cache_dir` is
inside its root, or another user, when it is shared) can replace any part of a generation:
manifest.json, CURRENT, strings.msgpack, files.msgpack, vocab.msgpack, pins. Found by an
audit. The searches run in a child process under an address-space cap, so a part that is read
without end fails the child, not the machine."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from search_engine.errors import IndexDamagedError, IndexStoreError
from search_engine.index.store import IndexStore
from tests.crafted_index_helpers import MB, build, search_in_child
from tests.index_helpers import CountingEmbedder, write_repo


@pytest.mark.slow
@pytest.mark.parametrize("part", ["manifest.json", "chunks/strings.msgpack"])
def test_an_index_part_linked_to_dev_zero_is_refused_in_bounded_memory(
    tmp_path: Path, counting: CountingEmbedder, part: str
) -> None:
    """`manifest.json` or `chunks/strings.msgpack` replaced by a link to /dev/zero. Before:
    index parts were opened by path, following links whatever the file type, so
    `read_text`/`read_bytes` read until memory ran out: 5.3 GB peak RSS under a 6 GB cap in
    6-7 s (the OOM killer without a cap), on every search, with no rebuild. Now a part that is
    not a regular file is refused unread (a generation holding anything but regular files and
    directories is damaged): the search rebuilds the index and answers, under 400 MB peak RSS."""
    repo = write_repo(tmp_path / "repo")
    cache = tmp_path / "cache"
    gen = build(repo, cache, counting)
    (gen / part).unlink()
    os.symlink("/dev/zero", gen / part)

    report = search_in_child(repo, cache, address_space=3 << 30, timeout_s=60)

    assert report.get("peak_rss", 1 << 40) < 400 * MB, f"reading {part} -> /dev/zero: {report}"
    assert "matches" in report, f"no rebuild, the search failed: {report}"


@pytest.mark.slow
def test_a_current_pointer_that_is_a_fifo_does_not_hang_searches(tmp_path: Path, counting: CountingEmbedder) -> None:
    """`CURRENT` replaced by a FIFO. Before: opening it blocked until a writer came, so every
    semantic or hybrid search hung for ever (semantic search has no time limit). Now `CURRENT`
    is opened without waiting and must be a regular file: the search is over within 15 s."""
    repo = write_repo(tmp_path / "repo")
    cache = tmp_path / "cache"
    gen = build(repo, cache, counting)
    current = gen.parent / "CURRENT"
    current.unlink()
    os.mkfifo(current)

    report = search_in_child(repo, cache, timeout_s=15)

    assert not report.get("timeout"), "a hybrid search blocked on opening CURRENT (a FIFO) for 15 s"


def test_current_cannot_name_a_generation_outside_the_index_dir(tmp_path: Path, counting: CountingEmbedder) -> None:
    """`CURRENT` holding `gen-/../../<elsewhere>`, with the generation moved out of the cache.
    Before: any name that started with "gen-" was taken, so the generation outside the cache
    was opened and served. Now `CURRENT` must name `gen-` and digits: nothing outside the
    index dir is opened."""
    repo = write_repo(tmp_path / "repo")
    cache = tmp_path / "cache"
    gen = build(repo, cache, counting)
    elsewhere = tmp_path / "not-the-cache" / "some-generation"
    elsewhere.parent.mkdir()
    shutil.move(gen, elsewhere)
    (gen.parent / "gen-").mkdir()
    (gen.parent / "CURRENT").write_text(f"gen-/{os.path.relpath(elsewhere, gen.parent / 'gen-')}\n")

    store = IndexStore(gen.parent)
    snapshot = store.load()
    opened = None if snapshot is None else snapshot.directory.resolve()
    assert opened is None or gen.parent in opened.parents, f"CURRENT opened {opened}, outside {gen.parent}"


def test_directories_nested_past_a_generations_depth_are_damage(tmp_path: Path, counting: CountingEmbedder) -> None:
    """Directories nested in a generation. Before (found by a review): the check of what a
    generation holds recursed per level, so 1,100 of them failed it with a RecursionError,
    neither damage nor a store error: every search failed and nothing was rebuilt. Now it
    walks without recursing, and past 4 levels it is damage. (50 levels here: pytest's own
    clean-up of the temporary directory recurses per level too.)"""
    gen = build(write_repo(tmp_path / "repo"), tmp_path / "cache", counting)
    os.makedirs(gen.joinpath(*["a"] * 50))
    with pytest.raises(IndexDamagedError, match="nested deeper"):
        IndexStore(gen.parent).load()


def test_an_unreadable_part_is_a_store_error_not_damage(
    tmp_path: Path, counting: CountingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EACCES on a generation's directory is the machine's fault, not the index's: a rebuild
    would not help. Before (found by a review) the raw OSError escaped the store, which its
    callers do not catch; now it is an IndexStoreError, and not damage. (Simulated: the tests
    may run as root.)"""
    gen = build(write_repo(tmp_path / "repo"), tmp_path / "cache", counting)
    real = os.scandir

    def scandir(path: Path) -> Any:
        if str(path).endswith("chunks"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(IndexStoreError, match="Permission denied") as raised:
        IndexStore(gen.parent).load()
    assert not isinstance(raised.value, IndexDamagedError)
