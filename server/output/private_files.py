"""Private files written whole: the safe-write primitives behind every file codepager keeps.

Offloaded pages live under the shared system temp dir and proxy datasets under the user's data
dir; both hold other programs' output, so both are written the same careful way:
- the directory is created 0700 and must be a real directory we own (a symlink or a directory
  planted by another user is refused, never written into). One that already exists with
  looser permissions (a 0777 left by a careless mkdir) is tightened to 0700 before use; a
  shared directory (sticky bit, like /tmp itself) is refused instead, since tightening it
  would lock every other user out of it;
- a file is created 0600 with O_EXCL|O_NOFOLLOW relative to an open directory descriptor, so a
  swapped symlink cannot redirect the write, under a temporary name that is then renamed, so
  a reader never sees a torn file;
- listing (and therefore cleanup) only yields regular files we own whose name matches the
  caller's pattern, never following symlinks, so a foreign file is never touched.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any


log = logging.getLogger(__name__)


class PrivateFileError(RuntimeError):
    """A directory or file could not be used safely; the message says which and why."""


def open_private_dir(path: Path, *, create: bool, label: str) -> int:
    """An O_NOFOLLOW descriptor of `path` after checking it is a directory we own.

    `label` names the setting the directory comes from, so the error tells the user what to fix.
    """
    if create:
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except FileExistsError:
            raise PrivateFileError(f"{label} {path} exists and is not a directory") from None
        except OSError as exc:
            raise PrivateFileError(f"cannot create {label} {path}: {exc.strerror or exc}") from exc
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise PrivateFileError(
            f"cannot open {label} {path}: {exc.strerror or exc} (it must be a real directory, not a symlink)"
        ) from exc
    try:
        _make_private(fd, path, label)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _make_private(fd: int, path: Path, label: str) -> None:
    """Check the open directory `fd` is ours, and tighten it to 0700 if others may enter it."""
    st = os.fstat(fd)
    if st.st_uid != os.geteuid():
        raise PrivateFileError(f"{label} {path} belongs to another user (uid {st.st_uid}); refusing to use it")
    mode = stat.S_IMODE(st.st_mode)
    if not mode & 0o077:
        return
    if mode & stat.S_ISVTX:
        raise PrivateFileError(
            f"{label} {path} is a shared directory (mode {mode:o}, sticky bit); point {label} at a "
            "directory of its own inside it, which codepager creates 0700"
        )
    try:
        os.fchmod(fd, 0o700)
    except OSError as exc:
        raise PrivateFileError(
            f"{label} {path} is open to other users (mode {mode:o}) and could not be made 0700 "
            f"({exc.strerror or exc}); refusing to use it"
        ) from exc
    log.warning("%s %s was open to other users (mode %o); made it 0700", label, path, mode)


def write_atomically(dir_fd: int, name: str, chunks: Iterable[bytes]) -> None:
    """Write `chunks` to `name` in the directory `dir_fd`, 0600, all or nothing (via `.NAME.tmp`)."""
    temp = f".{name}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        with os.fdopen(fd, "wb") as f:
            f.writelines(chunks)
        os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise PrivateFileError(f"could not write {name}: {exc.strerror or exc}") from exc


def owned_files(
    pattern: re.Pattern[str], where: Path | int
) -> Iterator[tuple[os.DirEntry[Any], os.stat_result, re.Match[str]]]:
    """Entries of `where` (a path or directory descriptor) named like `pattern` that are regular
    files we own; symlinks are never followed. An unreadable directory yields nothing."""
    uid = os.geteuid()
    try:
        with os.scandir(where) as it:
            entries = list(it)
    except OSError:
        return
    for entry in entries:
        m = pattern.match(entry.name)
        if m is None:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_uid == uid:
            yield entry, st, m


@contextlib.contextmanager
def open_owned(path: Path) -> Iterator[Any]:
    """`path` opened for binary reading, if it is a regular file we own (FileNotFoundError or
    PermissionError otherwise); symlinks are refused."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise PermissionError(f"{path} is not a file codepager wrote")
        yield f
