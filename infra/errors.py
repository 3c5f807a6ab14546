"""The errors of the shared infrastructure: a file or directory codepager keeps for itself is not
what it must be.

Not engine errors: each user says what a refusal means for its file (index damage, a bad key
file, a dataset not found, an unusable cache dir), so these carry only the fact and what to do.

    NotRegularFileError      (ValueError) a file of ours is a FIFO, device, another's, too big
    └── IsALinkError         it is a link
    UnsafeDirectoryError     (ValueError) a dir of ours others could plant files in
"""

from __future__ import annotations

__all__ = ["IsALinkError", "NotRegularFileError", "UnsafeDirectoryError"]


class NotRegularFileError(ValueError):
    """A file codepager reads back as its own (`infra.regular_file`) is not a regular file of the
    expected owner and size: a link, FIFO or device planted in its place."""


class IsALinkError(NotRegularFileError):
    """The file is a link (reading it would read whatever it points to)."""


class UnsafeDirectoryError(ValueError):
    """A directory codepager would read back as its own (`infra.private_dir`) is another user's,
    or shared and cannot be made private: refused, saying what to do."""
