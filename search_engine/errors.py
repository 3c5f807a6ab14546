"""Typed errors of the search engine.

Each refusal has its own class so the layers above can map it precisely (the MCP server turns
them into JSON-RPC errors or isError results, the CLI into exit status 2) without parsing
messages. Every message says what to do next, because the reader is often an agent.

Every exception the engine raises on purpose is defined here::

    SearchError                          (Exception) base: the CLI exits 2, MCP answers isError
    ├── InvalidQueryError                (+ ValueError) bad regex, empty query; .position
    ├── PathError                        (+ ValueError)
    │   ├── PathNotFoundError            missing or unsearchable path
    │   └── PathOutsideRootError         outside the allowed roots
    ├── SearchTimeoutError               (+ TimeoutError) over search.timeout_s
    ├── ToolMissingError                 (+ RuntimeError) no ripgrep
    ├── IndexNotReadyError               index still building; .phase/.done/.total/.eta_s
    ├── ModelLoadError                   (+ RuntimeError) embedding model unusable
    └── IndexStoreError                  (+ RuntimeError) index unreadable or unwritable
        ├── IndexDamagedError            a generation's files are damaged: a full rebuild repairs it
        └── UnsafeCacheDirError          (+ infra's UnsafeDirectoryError) others could plant indexes
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Iterator
from pathlib import Path

from infra import UnsafeDirectoryError


class SearchError(Exception):
    """Base of every error the engine raises on purpose."""


class InvalidQueryError(SearchError, ValueError):
    """The pattern or query cannot be searched (bad regex, empty query, ...)."""

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.position = position


class PathError(SearchError, ValueError):
    """A path is missing, not a directory/file we can search, or outside the allowed roots."""


class PathNotFoundError(PathError):
    pass


class PathOutsideRootError(PathError):
    pass


class SearchTimeoutError(SearchError, TimeoutError):
    """The search exceeded its time limit and was stopped."""


class ToolMissingError(SearchError, RuntimeError):
    """A required external tool (ripgrep) is not installed."""


class IndexNotReadyError(SearchError):
    """Semantic/hybrid search asked before the index is built. Carries progress for the reply:
    the build's phase, its done/total, and an estimate of the seconds left (None: unknown)."""

    def __init__(
        self,
        message: str,
        done: int = 0,
        total: int | None = None,
        *,
        phase: str | None = None,
        eta_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.done = done
        self.total = total
        self.phase = phase
        self.eta_s = eta_s


class ModelLoadError(SearchError, RuntimeError):
    """The embedding model cannot be loaded (missing path, unknown name; never downloaded)."""


class IndexStoreError(SearchError, RuntimeError):
    """The persistent index cannot be read or written."""


class IndexDamagedError(IndexStoreError):
    """A generation's files are damaged (cut short, emptied, garbled): what was written is not
    what is there. Raised where the damage shows, which for parts read lazily (the lexical
    postings, the symbol definitions, a file's chunk text) can be mid-search; the engine and
    the updater answer it with a full rebuild instead of an incremental update on top of it.
    `where` is the damaged part, so that of several searches meeting the same damage only the
    first rebuilds (`IndexManager.repair`)."""

    def __init__(self, message: str, where: Path) -> None:
        super().__init__(message)
        self.where = where


class UnsafeCacheDirError(IndexStoreError, UnsafeDirectoryError):
    """The cache dir (`index.cache_dir`) is another user's, or shared and cannot be made private
    (`infra.private_dir`): every index under it would be read back as ours. An IndexStoreError,
    so the engine's callers treat it as the store being unusable, and infra's refusal, so the
    message says what to do."""


#: What reading an index generation's bytes raises when they are not what was written: an
#: emptied .npy (numpy's EOFError), cut compressed text (zlib.error), a packed table cut short
#: or holding the wrong types (msgspec's errors, which are ValueErrors) or a garbled .npy
#: header (ValueError), a part missing or of the wrong kind, a table of the wrong shape
#: (KeyError, TypeError), or values out of range (IndexError, OverflowError: a crafted offset
#: of 2^64-1). `reading` turns these into IndexDamagedError. Other
#: OSErrors (EACCES, EIO, EMFILE) are the machine's, not the index's: a rebuild would not help.
_DAMAGE: tuple[type[Exception], ...] = (
    FileNotFoundError,
    NotADirectoryError,
    IsADirectoryError,
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    OverflowError,
    EOFError,
    zlib.error,
)


@contextlib.contextmanager
def reading(part: str, where: Path) -> Iterator[None]:
    """Read `part` of an index generation, at `where`: what `_DAMAGE` raises becomes
    IndexDamagedError (the caller rebuilds), any other OSError IndexStoreError (no rebuild:
    it would not help), and an IndexStoreError raised inside passes as it is. The one place
    every reader of a generation turns a failed read into one of the two."""
    try:
        yield
    except IndexStoreError:
        raise
    except _DAMAGE as exc:
        raise IndexDamagedError(
            f"cannot read {part} in {where} ({exc}): damaged or missing, it will be rebuilt", where
        ) from exc
    except OSError as exc:
        raise IndexStoreError(f"cannot read {part} in {where}: {exc}") from exc
