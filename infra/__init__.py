"""Shared infrastructure every layer uses: directories and files codepager keeps for itself, reads
beneath a root, lazy package exports, the sweeper and concurrency slots.

Its users (`search_engine`, `sessions`, `server`) import only the names in `__all__`, from here.
It imports nothing of theirs, so all three can build on it without a cycle; a refusal here
carries only the fact and what to do, and each user says what it means for its own file.
"""

from __future__ import annotations

from infra.beneath import MAX_HELD, BeneathWalk, open_beneath, read_beneath
from infra.errors import IsALinkError, NotRegularFileError, UnsafeDirectoryError
from infra.lazy import lazy_exports
from infra.private_dir import check_cache_dir, check_own_dir, make_private
from infra.regular_file import open_regular_file
from infra.secret_file import MIN_SECRET_LENGTH, SecretFile
from infra.slots import Slots
from infra.sweeper import Sweeper

__all__ = [
    "MAX_HELD",
    "MIN_SECRET_LENGTH",
    "BeneathWalk",
    "IsALinkError",
    "NotRegularFileError",
    "SecretFile",
    "Slots",
    "Sweeper",
    "UnsafeDirectoryError",
    "check_cache_dir",
    "check_own_dir",
    "lazy_exports",
    "make_private",
    "open_beneath",
    "open_regular_file",
    "read_beneath",
]
