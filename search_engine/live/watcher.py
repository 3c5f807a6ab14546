"""Which files of a root changed, told by the operating system. `watch()` picks the watcher: on
Linux inotify read directly (`search_engine.live.inotify`: no thread, and a barrier that is one
non-blocking read of the kernel queue), elsewhere the `TreeWatcher` below, file events through
watchfiles (the Rust `notify` binding: FSEvents, ReadDirectoryChangesW). Both record changes
the same way (`ChangeLog`).

Events arrive on a thread of their own, a few milliseconds after the change. A search must see
every change completed before it began, so it does not trust what has arrived so far: it calls
`barrier()`, which writes a sentinel file in a private directory watched by the same watcher
and waits until the watcher has handed over the sentinel's event. The kernel queues events
in order, so by then every event of a change made before the call has been recorded. The
barrier costs about two polling steps of the watcher (`FAST_STEP_MS`), and it is bounded: past
`timeout_s` it reports failure and the caller falls back to listing the tree.

What is recorded is a change counter (`seq`, one per batch of events that touches something a
search may see) and, per changed path, the last batch it changed in. Paths that never reach an
index are not counted: a hidden name (`.git/` churns on every commit; discovery skips hidden
files) and codepager's own cache dir. An ignore file (`.gitignore`, `.ignore`, `.rgignore`) is
hidden but changes what discovery lists beneath it, so its change records its directory. The
paths are bounded (`MAX_TRACKED`): past it the watcher only says "something changed", which the
caller treats as a change it cannot place (`overflowed`).

The watcher polls its event queue every `FAST_STEP_MS` while searches come (a barrier waits
about two steps) and every `IDLE_STEP_MS` after `IDLE_AFTER_S` without one, so watching an idle
tree costs well under 1% of a core.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import platform
import shutil
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from watchfiles._rust_notify import RustNotify

log = logging.getLogger(__name__)

FAST_STEP_MS = 1
IDLE_STEP_MS = 20
IDLE_AFTER_S = 30.0
# How long one `watch` call of the thread lasts when nothing happens (it then rechecks the pace).
_WATCH_TIMEOUT_MS = 200
# Changes are grouped for at most this long before they are recorded.
_DEBOUNCE_MS = 20
DEFAULT_BARRIER_TIMEOUT_S = 2.0
# Changed paths remembered; past it only the fact that something changed is.
MAX_TRACKED = 100_000
IGNORE_FILES = frozenset({".gitignore", ".ignore", ".rgignore"})
# Filesystems whose changes made on another machine raise no local event: watched by polling.
NETWORK_FILESYSTEMS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "fuse.sshfs", "afs", "ceph", "glusterfs", "lustre", "davfs"}
)


class WatchUnavailable(RuntimeError):
    """The root cannot be watched by events (inotify watch limit, a network filesystem, no
    such directory); the message says why, for index_status and the log."""


class ChangeLog(ABC):
    """What a watcher has recorded of one root: a change counter (`seq`, one per batch of
    events touching something a search may see) and, per changed path, the last batch it
    changed in; the kinds of watcher (`TreeWatcher`, `search_engine.live.inotify.InotifyWatcher`)
    differ only in how events reach `_record_paths`."""

    def __init__(self, root: Path, ignored: Path | None) -> None:
        self.root = Path(root)
        self._ignored = ignored.resolve() if ignored is not None else None
        self._cond = threading.Condition()
        self._seq = 0
        self._changed: dict[str, int] = {}
        self._overflow_seq = 0  # the last batch whose paths were not all kept (MAX_TRACKED)
        self.failure: str | None = None

    @property
    @abstractmethod
    def seq(self) -> int:
        """How many batches of relevant changes were recorded so far."""

    @abstractmethod
    def barrier(self, timeout_s: float = DEFAULT_BARRIER_TIMEOUT_S) -> int | None:
        """Make sure every change completed before this call is recorded; the change counter
        then, or None when that cannot be confirmed within `timeout_s` (or the watcher failed)."""

    @abstractmethod
    def close(self) -> None:
        """Stop watching."""

    def changed_after(self, seq: int) -> tuple[frozenset[str], bool]:
        """The paths (relative, `/`-separated) changed in a batch after `seq`, and whether some
        change after it could not be placed (too many paths)."""
        with self._cond:
            paths = frozenset(p for p, s in self._changed.items() if s > seq)
            return paths, self._overflow_seq > seq

    def forget(self, seq: int) -> None:
        """Drop what was recorded up to `seq` (folded into the index)."""
        with self._cond:
            self._changed = {p: s for p, s in self._changed.items() if s > seq}

    def _record_paths(self, paths: set[str], overflow: bool = False) -> None:
        """One batch of changed paths (caller holds the lock); `overflow`: some changes of it
        could not be placed."""
        if not paths and not overflow:
            return
        self._seq += 1
        if overflow:
            self._overflow_seq = self._seq
        for p in paths:
            if len(self._changed) < MAX_TRACKED or p in self._changed:
                self._changed[p] = self._seq
            else:
                self._overflow_seq = self._seq

    def _relevant(self, raw: str) -> str | None:
        """The root-relative path an event names, or None if no search can see it."""
        path = Path(raw)
        if self._ignored is not None and (path == self._ignored or self._ignored in path.parents):
            return None
        try:
            rel = PurePosixPath(path.relative_to(self.root).as_posix())
        except ValueError:
            return None
        parts = rel.parts
        if not parts:
            return ""  # the root itself
        if any(p.startswith(".") for p in parts[:-1]):
            return None
        if parts[-1] in IGNORE_FILES:  # what is listed beneath its directory may change
            return "" if len(parts) == 1 else str(rel.parent)
        return None if parts[-1].startswith(".") else str(rel)


class TreeWatcher(ChangeLog):
    """Watches one root through watchfiles; see the module docstring. `clock` is monotonic
    seconds."""

    def __init__(
        self,
        root: Path,
        private_parent: Path,
        *,
        ignored: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(root, ignored)
        self._clock = clock
        self._sentinels = Path(tempfile.mkdtemp(prefix="codepager-watch-", dir=private_parent))
        try:
            self._notify = RustNotify([str(self.root), str(self._sentinels)], False, False, 0, True, True)
        except (OSError, RuntimeError) as exc:
            shutil.rmtree(self._sentinels, ignore_errors=True)
            raise WatchUnavailable(f"cannot watch {self.root} for changes: {exc}") from exc
        self._tokens = itertools.count(1)
        self._issued = 0  # the last sentinel written
        self._seen = 0  # the last sentinel the thread handed over
        self._last_use = clock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="codepager-watch", daemon=True)
        self._thread.start()

    @property
    def seq(self) -> int:
        """How many batches of relevant changes were recorded so far."""
        with self._cond:
            return self._seq

    def barrier(self, timeout_s: float = DEFAULT_BARRIER_TIMEOUT_S) -> int | None:
        """Make sure every change completed before this call is recorded; the change counter
        then, or None when the watcher could not confirm it within `timeout_s` (or has failed)."""
        with self._cond:
            self._last_use = self._clock()
            if self.failure is not None:
                return None
            token = next(self._tokens)
            # Written under the lock, so sentinels are written in token order.
            try:
                (self._sentinels / str(token)).write_bytes(b"")
            except OSError as exc:
                log.warning("the change watcher of %s cannot write its sentinel: %s", self.root, exc)
                return None
            self._issued = token
            if not self._cond.wait_for(lambda: self._seen >= token or self.failure is not None, timeout_s):
                return None
            return self._seq if self.failure is None else None

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        with contextlib.suppress(Exception):
            self._notify.close()
        shutil.rmtree(self._sentinels, ignore_errors=True)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                idle = self._clock() - self._last_use > IDLE_AFTER_S
                step = IDLE_STEP_MS if idle else FAST_STEP_MS
                out = self._notify.watch(_DEBOUNCE_MS, step, _WATCH_TIMEOUT_MS, self._stop)
                if isinstance(out, set):
                    self._record(out)
        except Exception as exc:  # the watcher is gone: callers fall back to polling
            log.warning("the change watcher of %s stopped: %s; checking by listing the tree instead", self.root, exc)
            with self._cond:
                self.failure = f"the change watcher stopped: {exc}"
                self._cond.notify_all()

    def _record(self, events: set[tuple[int, str]]) -> None:
        sentinel_prefix = str(self._sentinels) + os.sep
        tokens: list[int] = []
        paths: set[str] = set()
        for _kind, raw in events:
            if raw.startswith(sentinel_prefix):
                name = raw[len(sentinel_prefix) :]
                if name.isdigit():
                    tokens.append(int(name))
                continue
            rel = self._relevant(raw)
            if rel is not None:
                paths.add(rel)
        with self._cond:
            self._record_paths(paths)
            if tokens:
                self._seen = max(self._seen, *tokens)
            self._cond.notify_all()
        for token in tokens:
            with contextlib.suppress(OSError):
                (self._sentinels / str(token)).unlink()


def watch(
    root: Path, private_parent: Path, *, ignored: Path | None = None, clock: Callable[[], float] = time.monotonic
) -> ChangeLog:
    """A watcher of `root`: inotify read directly on Linux (`search_engine.live.inotify`: its
    barrier costs a system call), watchfiles elsewhere. Raises `WatchUnavailable` where events
    cannot be trusted or had."""
    fstype = filesystem_type(Path(root))
    if fstype in NETWORK_FILESYSTEMS:
        raise WatchUnavailable(f"{root} is on a network filesystem ({fstype}), whose changes raise no events")
    if platform.system() == "Linux":
        from search_engine.live.inotify import InotifyWatcher

        return InotifyWatcher(root, ignored=ignored)
    return TreeWatcher(root, private_parent, ignored=ignored, clock=clock)


def filesystem_type(path: Path) -> str | None:
    """The type of the filesystem `path` is on (Linux: the longest mount point above it in
    /proc/self/mounts), None where that cannot be read."""
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return None
    target = str(Path(path).resolve())
    best, kind = "", None
    for fields in mounts:
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind
