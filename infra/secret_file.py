"""A secret codepager generates once and keeps in a file of its own: the cursor key
(`sessions.keys`) and the HTTP bearer token (`server.auth_token`).

Kept, not made anew at each start, so what holds it (a cursor an agent kept, a client
registered with the token) still works after a restart. The file is written under a temporary
name created 0600 with O_EXCL, so no other user can read it even for a moment, then published
with `os.link`, which fails rather than replaces: two processes starting at once agree on the
one published first instead of overwriting each other. It is read back only as a regular file
of this user's (never through a link, never waiting on a FIFO), no further than a secret can be.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from infra.errors import IsALinkError, NotRegularFileError
from infra.regular_file import open_regular_file

MIN_SECRET_LENGTH = 16
"""Shorter than this, a secret is easier to guess; a configured one is warned about."""

#: A secret file is one line of ~64 characters; more is not one this code wrote.
_MAX_SECRET_FILE_BYTES = 4096

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SecretFile:
    """Where a secret is kept, and how its errors name it."""

    path: Path
    temp_prefix: str
    """Its temporary files are `<temp_prefix><pid>.<random>`, beside it (a search leaves them out)."""
    label: str
    """What it is, for messages: "the cursor key file"."""
    remedy: str
    """What to do about a bad one: "delete it to have a new key generated, or set sessions.secret_key"."""

    def load_or_create(self) -> str:
        """The secret kept in the file, generated into it first if there is none. ValueError
        (saying what to do) when what is there is not such a file; OSError when it cannot be
        read or written, for the caller to decide what a secret of this process only is worth."""
        if not os.path.lexists(self.path):
            self._create()
        return self._read()

    def _create(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.path.with_name(f"{self.temp_prefix}{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(48) + "\n")
            with contextlib.suppress(FileExistsError):  # another process published its secret first; use that one
                os.link(tmp, self.path)
        finally:
            tmp.unlink(missing_ok=True)

    def _read(self) -> str:
        """The secret in the file, which must be a regular file of ours: never followed through a
        link (a planted `cursor.key -> /etc/passwd` would have had that file made 0600 and its
        content taken as the key), never waited on (a FIFO), read no further than a secret can be."""
        try:  # EACCES, EIO are raised as they are
            f = open_regular_file(self.path, owned=True)
        except IsALinkError:
            raise ValueError(f"{self.label} {self.path} must be a regular file, not a link; {self.remedy}") from None
        except NotRegularFileError:
            raise ValueError(f"{self.label} {self.path} is not a regular file of this user's; {self.remedy}") from None
        with f:
            mode = stat.S_IMODE(os.fstat(f.fileno()).st_mode)
            if mode & 0o077:
                log.warning(
                    "%s %s was readable by others (mode %o); restricting it to 0600", self.label, self.path, mode
                )
                os.fchmod(f.fileno(), 0o600)
            secret = f.read(_MAX_SECRET_FILE_BYTES).decode("utf-8", "replace").strip()
        if len(secret) < MIN_SECRET_LENGTH:
            raise ValueError(f"{self.label} {self.path} is empty or damaged; {self.remedy}")
        return secret
