"""Which files of a root changed, on Linux: inotify read directly, with no thread.

The kernel puts a change's event on the inotify queue before the system call that made the
change returns. So a search does not need a round trip through a watcher thread to know that
every change completed before it began is recorded: reading the queue dry (a non-blocking
`read`, microseconds when it is empty) at the start of the call is the barrier. With no
thread, an idle tree costs nothing but the kernel's watches (one per directory, about 1 KB
each); events wait in the kernel queue until the next search reads them.

Watches are per directory: a directory created or moved in gets its own watches as soon as its
event is read, and is itself recorded as changed (what was written in it before its watch
existed is found by the fold, which lists it). A directory moved out has its watches dropped.
The queue holds `max_queued_events` (16,384 by default) events: past it the kernel reports an
overflow and the whole root is recorded as changed (a full check). Hidden directories (`.git/`)
and codepager's cache dir are not watched, as no search sees them. Running out of watches
(`max_user_watches`) raises `WatchUnavailable`: the root is then checked by listing it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct
import weakref
from pathlib import Path

from search_engine.live.watcher import ChangeLog, WatchUnavailable

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x1000000
IN_DONT_FOLLOW = 0x2000000
IN_EXCL_UNLINK = 0x4000000
IN_ISDIR = 0x40000000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = 0o2000000
_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
    | IN_EXCL_UNLINK
)
_EVENT = struct.Struct("iIII")
_READ_SIZE = 1 << 16

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.inotify_init1.argtypes = [ctypes.c_int]
_libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
_libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]


class InotifyWatcher(ChangeLog):
    """Watches one root through inotify; see the module docstring. Safe to share between
    threads: reading the queue and recording happen under one lock."""

    def __init__(self, root: Path, *, ignored: Path | None = None) -> None:
        super().__init__(root, ignored)
        fd = _libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            raise WatchUnavailable(f"cannot watch {self.root} for changes: {os.strerror(ctypes.get_errno())}")
        self._fd = fd
        # A watcher dropped without close() (its manager let go of) still gives its instance
        # back: the kernel allows a user few of them (fs.inotify.max_user_instances, 128).
        self._release = weakref.finalize(self, os.close, fd)
        self._dirs: dict[int, str] = {}  # watch descriptor -> root-relative directory ("" the root)
        try:
            self._watch_tree("")
        except WatchUnavailable:
            self._release()
            raise

    @property
    def seq(self) -> int:
        """How many batches of relevant changes were recorded so far (the queue read first)."""
        with self._cond:
            self._drain()
            return self._seq

    def barrier(self, timeout_s: float = 0.0) -> int | None:
        """Record every change completed before this call (the queue read dry); the change
        counter then, or None once the watcher has failed. Never waits (`timeout_s` is there
        for the interface `search_engine.live.read_your_writes` shares with `TreeWatcher`)."""
        with self._cond:
            self._drain()
            return self._seq if self.failure is None else None

    def close(self) -> None:
        with self._cond:
            self._release()  # closes the instance once, however often it is called
            self._fd = -1

    def _drain(self) -> None:
        """Read the queue dry and record what it held, as one batch (caller holds the lock)."""
        if self.failure is not None or self._fd < 0:
            return
        paths: set[str] = set()
        overflow = False
        while True:
            try:
                data = os.read(self._fd, _READ_SIZE)
            except BlockingIOError:
                break
            except OSError as exc:
                self.failure = f"the change watcher stopped: {exc}"
                break
            overflow |= self._parse(data, paths)
        if overflow:
            paths.add("")
        self._record_paths(paths, overflow)

    def _parse(self, data: bytes, paths: set[str]) -> bool:
        """Add the changed paths `data` names to `paths`; True if the kernel dropped events."""
        overflow = False
        offset = 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _cookie, size = _EVENT.unpack_from(data, offset)
            raw = data[offset + _EVENT.size : offset + _EVENT.size + size].rstrip(b"\0")
            offset += _EVENT.size + size
            if mask & IN_Q_OVERFLOW:
                overflow = True
                continue
            parent = self._dirs.get(wd)
            if parent is None:
                continue
            if mask & IN_IGNORED:
                del self._dirs[wd]
                continue
            if mask & (IN_DELETE_SELF | IN_MOVE_SELF):
                if parent == "":
                    self.failure = f"{self.root} itself was deleted or moved"
                continue  # its parent's event names it
            name = os.fsdecode(raw)
            rel = f"{parent}/{name}" if parent and name else (parent or name)
            relevant = self._relevant(str(self.root / rel)) if rel else ""
            if relevant is None:
                continue
            paths.add(relevant)
            if mask & IN_ISDIR and mask & IN_MOVED_FROM:
                self._unwatch_tree(rel)
            elif mask & IN_ISDIR and mask & (IN_CREATE | IN_MOVED_TO):
                try:
                    self._watch_tree(rel)
                except WatchUnavailable as exc:
                    self.failure = str(exc)
        return overflow

    def _watch_tree(self, rel: str) -> None:
        """Watch directory `rel` and every visible directory beneath it."""
        top = self.root / rel if rel else self.root
        for current, dirnames, _files in os.walk(top):
            here = Path(current)
            if self._relevant(str(here)) is None:
                dirnames[:] = []
                continue
            wd = _libc.inotify_add_watch(self._fd, os.fsencode(current), _MASK)
            if wd < 0:
                err = ctypes.get_errno()
                if err == errno.ENOSPC:
                    raise WatchUnavailable(
                        f"cannot watch {self.root}: the inotify watch limit is reached "
                        "(raise fs.inotify.max_user_watches)"
                    )
                if err in (errno.ENOENT, errno.ENOTDIR):  # gone meanwhile: its parent's event says so
                    dirnames[:] = []
                    continue
                raise WatchUnavailable(f"cannot watch {current}: {os.strerror(err)}")
            self._dirs[wd] = here.relative_to(self.root).as_posix() if here != self.root else ""
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]

    def _unwatch_tree(self, rel: str) -> None:
        """Stop watching `rel` and beneath it (it moved away: its watches would name old paths)."""
        for wd, path in list(self._dirs.items()):
            if path == rel or path.startswith(rel + "/"):
                _libc.inotify_rm_watch(self._fd, wd)
                del self._dirs[wd]
