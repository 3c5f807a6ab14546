"""Opening a file codepager keeps for itself (an index part, the cursor key, an offloaded page,
a saved dataset) so that a planted object in its place is refused rather than read.

Whoever can write where such a file lives (a repository that commits the cache dir, a
process of the same user) can leave a link there (reading it would read, and a chmod would
change, whatever it points to), a FIFO (opening it for reading waits for a writer, forever) or
a device (`/dev/zero` reads without end). So the file is opened without following a link at
its last component and without waiting (`O_NONBLOCK`, which does nothing to a regular
file), and is then checked on the open descriptor, where nothing can swap it any more: a
regular file, of this user when the caller says so, of at most so many bytes when it says so.
One helper for every such read, so that every one of them refuses the same things.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from infra.errors import IsALinkError, NotRegularFileError

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def open_regular_file(path: Path | str, *, owned: bool = False, max_bytes: int | None = None) -> BinaryIO:
    """`path` opened for binary reading if it is a regular file (of this user when `owned`, of
    at most `max_bytes` bytes when given): NotRegularFileError otherwise, IsALinkError for a
    link. The open's other errors are raised as they are (FileNotFoundError, PermissionError)."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise IsALinkError(f"{path} is a link") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFileError(f"{path} is not a regular file")
        if owned and st.st_uid != os.geteuid():
            raise NotRegularFileError(f"{path} belongs to another user")
        if max_bytes is not None and st.st_size > max_bytes:
            raise NotRegularFileError(f"{path} holds {st.st_size:,} bytes, more than {max_bytes:,}")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
