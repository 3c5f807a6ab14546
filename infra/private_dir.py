"""Directories codepager reads back as its own (the index cache, the offload and dataset dirs)
must be ones nobody else can plant files in.

What is found there is trusted: the cursor key cursors are sealed with, every index (its text
included), the pages and datasets an agent is pointed to. So such a directory must be this
user's, and not writable by others: one that is loses those write bits (only those, so a
group-inheriting setgid dir stays one), and a shared sticky one (`/tmp` itself), which cannot
be tightened without breaking it for everyone, is refused with what to do instead. The check
runs on an open descriptor, where a link swapped in meanwhile changes nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path

from infra.errors import UnsafeDirectoryError

log = logging.getLogger(__name__)


def make_private(fd: int, path: Path, label: str, closed: int = 0o077) -> None:
    """Check the open directory `fd` (at `path`, set by the setting `label`) is ours, and take
    the mode bits `closed` away from it (0700 by default) if it has any of them.
    UnsafeDirectoryError saying what to do when it cannot be used."""
    st = os.fstat(fd)
    if st.st_uid != os.geteuid():
        raise UnsafeDirectoryError(f"{label} {path} belongs to another user (uid {st.st_uid}); refusing to use it")
    mode = stat.S_IMODE(st.st_mode)
    if not mode & closed:
        return
    if mode & stat.S_ISVTX:
        raise UnsafeDirectoryError(
            f"{label} {path} is a shared directory (mode {mode:o}, sticky bit); point {label} at a "
            "directory of its own inside it, which codepager creates 0700"
        )
    tightened = mode & ~closed  # setgid kept: a group-inheriting dir stays one
    try:
        os.fchmod(fd, tightened)
    except OSError as exc:
        raise UnsafeDirectoryError(
            f"{label} {path} is open to other users (mode {mode:o}) and could not be made {tightened:04o} "
            f"({exc.strerror or exc}); refusing to use it"
        ) from exc
    log.warning("%s %s was open to other users (mode %o); made it %04o", label, path, mode, tightened)


def check_cache_dir(path: Path) -> None:
    """Refuse an `index.cache_dir` others can plant files in (`check_own_dir`). Called by every
    user of the dir (the index manager, the cursor key), so no entry point can forget it. It may
    be a root, whose mode is the user's: only others' write bits are taken away."""
    check_own_dir(path, "index.cache_dir")


def check_own_dir(path: Path, label: str) -> None:
    """Create `path` (0700) if it is missing, and refuse it (UnsafeDirectoryError) if others
    can plant files in it: one of another user's, a link of another user's, or a shared sticky
    one; one of ours others may write in loses their write bits. `label` names the setting it
    comes from. Nothing when the dir cannot be reached: its users then report it unwritable, as
    they would anyway."""
    with contextlib.suppress(OSError):
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        link = os.lstat(path)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # a link of the user's is followed
    except OSError:
        return
    try:
        if stat.S_ISLNK(link.st_mode) and link.st_uid != os.geteuid():  # its owner could repoint it
            raise UnsafeDirectoryError(
                f"{label} {path} is a link of another user's (uid {link.st_uid}); refusing to use it"
            )
        make_private(fd, path, label, closed=0o022)
    finally:
        os.close(fd)
