"""Where the cursor key (the secret cursors are sealed with) comes from.

A configured key wins (replicas behind one load balancer must share it). Without one, a random
key is generated on first start and kept in the cache dir, so cursors an agent holds survive a
server restart on the same machine. The file is created 0600 and published atomically with
`os.link`, so two servers starting at once agree on one key instead of overwriting each other.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
from pathlib import Path

from search_engine import (
    CURSOR_KEY_FILE,
    CURSOR_KEY_TEMP_PREFIX,
    IsALinkError,
    NotRegularFileError,
    check_cache_dir,
    open_regular_file,
)

MIN_KEY_LENGTH = 16

log = logging.getLogger(__name__)


def load_or_create_key(cache_dir: Path, configured: str | None = None) -> bytes:
    """The cursor key: `configured` if given, else the one kept in `cache_dir/cursor.key`."""
    if configured is not None:
        if not configured.strip():
            raise ValueError("sessions.secret_key is empty; set it to a long random string or unset it")
        if len(configured) < MIN_KEY_LENGTH:
            log.warning(
                "sessions.secret_key is only %d characters; cursors sealed with a short key are easier "
                "to forge. Use e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`",
                len(configured),
            )
        return configured.encode()
    check_cache_dir(Path(cache_dir))  # a key planted there would seal cursors its planter can read
    path = Path(cache_dir) / CURSOR_KEY_FILE
    if not os.path.lexists(path):
        _create_key_file(path)
    return _read_key_file(path)


def _create_key_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f"{CURSOR_KEY_TEMP_PREFIX}{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(48) + "\n")
        with contextlib.suppress(FileExistsError):  # another process published its key first; use that one
            os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


#: A key file is one line of ~64 characters; more is not a key this code wrote.
_MAX_KEY_FILE_BYTES = 4096


def _read_key_file(path: Path) -> bytes:
    """The key in `path`, which must be a regular file of ours: never followed through a link
    (a planted `cursor.key -> /etc/passwd` would have had that file made 0600 and its content
    taken as the key), never waited on (a FIFO), read no further than a key file can be."""
    try:  # EACCES, EIO are raised as they are: the server then keeps a key for this process only
        f = open_regular_file(path, owned=True)
    except IsALinkError:
        raise ValueError(
            f"the cursor key file {path} must be a regular file, not a link; delete it to have a new "
            "key generated or set sessions.secret_key"
        ) from None
    except NotRegularFileError:
        raise ValueError(
            f"the cursor key file {path} is not a regular file of this user's; delete it to have a "
            "new key generated, or set sessions.secret_key"
        ) from None
    with f:
        mode = stat.S_IMODE(os.fstat(f.fileno()).st_mode)
        if mode & 0o077:
            log.warning("cursor key %s was readable by others (mode %o); restricting it to 0600", path, mode)
            os.fchmod(f.fileno(), 0o600)
        key = f.read(_MAX_KEY_FILE_BYTES).decode("utf-8", "replace").strip()
    if len(key) < MIN_KEY_LENGTH:
        raise ValueError(
            f"the cursor key file {path} is empty or damaged; delete it to have a new key generated "
            "(outstanding cursors will stop working) or set sessions.secret_key"
        )
    return key.encode()
