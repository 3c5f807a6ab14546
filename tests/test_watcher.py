"""The watchers themselves, on a real tree with real kernel events: after `barrier()`, every
change completed before it is recorded (edits, new files, new directories with files in them,
renames of files and directories, deletions), and what no search sees (hidden paths, the cache
dir) is not. Both kinds run here: inotify read directly (Linux, what `watch` picks) and
watchfiles (the other platforms)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from search_engine.live.watcher import ChangeLog, TreeWatcher, watch
from tests.live_helpers import inotify_instances

KINDS: dict[str, Callable[[Path, Path], ChangeLog]] = {
    "watch": lambda root, private: watch(root, private, ignored=root / "cache"),
    "watchfiles": lambda root, private: TreeWatcher(root, private, ignored=root / "cache"),
}


@pytest.fixture(params=sorted(KINDS))
def watched(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, ChangeLog]]:
    root = (tmp_path / "root").resolve()
    (root / "pkg/sub").mkdir(parents=True)
    (root / "pkg/sub/a.py").write_text("a = 1\n")
    (root / "cache").mkdir()
    private = tmp_path / "private"
    private.mkdir()
    watcher = KINDS[request.param](root, private)
    yield root, watcher
    watcher.close()


def changes(watcher: ChangeLog, since: int) -> tuple[int, frozenset[str]]:
    seq = watcher.barrier()
    assert seq is not None
    return seq, watcher.changed_after(since)[0]


@pytest.mark.slow  # a watcher thread for watchfiles
def test_every_kind_of_change_is_recorded_by_the_barrier(watched: tuple[Path, ChangeLog]) -> None:
    root, watcher = watched
    seq, _ = changes(watcher, 0)
    with (root / "pkg/sub/a.py").open("a") as fh:
        fh.write("b = 2\n")
    seq, got = changes(watcher, seq)
    assert got == {"pkg/sub/a.py"}
    (root / "new").mkdir()
    (root / "new/deep").mkdir()
    (root / "new/deep/b.py").write_text("b = 1\n")
    seq, got = changes(watcher, seq)
    assert "new" in got or "new/deep/b.py" in got  # a directory covers what is beneath it
    (root / "new/deep/b.py").write_text("b = 2\n")  # a file in a directory created since watching
    seq, got = changes(watcher, seq)
    assert got == {"new/deep/b.py"}
    (root / "pkg/sub").rename(root / "moved")
    seq, got = changes(watcher, seq)
    assert {"pkg/sub", "moved"} <= got
    (root / "moved/a.py").write_text("c = 3\n")  # inside a directory moved in
    seq, got = changes(watcher, seq)
    assert got == {"moved/a.py"}
    (root / "moved/a.py").unlink()
    seq, got = changes(watcher, seq)
    assert got == {"moved/a.py"}
    (root / ".git").mkdir()
    (root / ".git/index").write_bytes(b"x")
    (root / "cache/blob").write_bytes(b"x")
    assert watcher.barrier() == seq  # nothing a search sees


@pytest.mark.skipif(sys.platform != "linux", reason="inotify is Linux's")
def test_on_linux_the_barrier_is_a_read_of_the_kernel_queue(tmp_path: Path) -> None:
    """No thread and no round trip: the change is recorded by the barrier itself."""
    from search_engine.live.inotify import InotifyWatcher

    (tmp_path / "root").mkdir()
    watcher = watch(tmp_path / "root", tmp_path, ignored=None)
    try:
        assert isinstance(watcher, InotifyWatcher)
        (tmp_path / "root/f.py").write_text("x = 1\n")
        assert watcher.barrier(timeout_s=0.0) == 1
        assert watcher.changed_after(0) == (frozenset({"f.py"}), False)
    finally:
        watcher.close()


@pytest.mark.skipif(sys.platform != "linux", reason="inotify is Linux's")
def test_a_dropped_watcher_gives_its_inotify_instance_back(tmp_path: Path) -> None:
    """A user may hold 128 inotify instances in all (fs.inotify.max_user_instances), across
    processes: a watcher let go of without close() (its manager dropped) closes its own."""
    from search_engine.live.inotify import InotifyWatcher

    (tmp_path / "root").mkdir()
    before = inotify_instances()
    watcher = InotifyWatcher(tmp_path / "root")
    assert inotify_instances() == before + 1
    del watcher
    assert inotify_instances() == before
    closed = InotifyWatcher(tmp_path / "root")
    closed.close()
    closed.close()  # once only, however often
    assert inotify_instances() == before
