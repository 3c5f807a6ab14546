"""Resolving what a caller names into a path inside an allowed root, or refusing it.

Every entry point (CLI, MCP tools, proxy) goes through `resolve_search_path`, so the rule
"never outside the roots, not via `..`, not via a symlink" lives in one place. Symlinks are
resolved before the containment check, which is what makes a link pointing out of the root a
refusal rather than a leak. Containment is also checked before existence, and everything
outside gets the same message, so errors reveal nothing about what lies outside the roots.
(This runs when a search is asked for. Files are later opened beneath the root with
`infra.beneath`, and a named path is re-checked that way just before ripgrep runs.)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from search_engine.errors import PathNotFoundError, PathOutsideRootError


@dataclass(frozen=True, slots=True)
class SearchLocation:
    """Where a search runs: the allowed `root` (absolute, resolved) and an optional `sub`
    path relative to it (forward slashes, None for the whole root)."""

    root: Path
    sub: str | None

    @property
    def target(self) -> Path:
        return self.root / self.sub if self.sub else self.root


def _is_within(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def resolve_search_path(path: str | os.PathLike[str] | None, roots: list[Path]) -> SearchLocation:
    """Map `path` (absolute, or relative to the first root) to a location inside one root.

    Raises PathOutsideRootError if it resolves outside every root, PathNotFoundError if it does
    not exist. With `path` None the first root is searched.
    """
    if not roots:
        raise PathOutsideRootError("no search roots are configured; start the server with --root DIR")
    resolved_roots = [Path(r).resolve() for r in roots]
    if path is None or str(path) in ("", "."):
        first = resolved_roots[0]
        if not first.is_dir():
            raise PathNotFoundError(f"search root does not exist or is not a directory: {first}")
        return SearchLocation(first, None)
    raw = Path(path)
    candidate = raw if raw.is_absolute() else resolved_roots[0] / raw
    try:
        # Where the path points, decided before asking whether it exists: symlinks followed as
        # far as they go, a missing or unreadable tail kept as written. Anything landing
        # outside the roots gets one answer, so an error never tells what exists out there,
        # what kind of thing it is, or where a link leads.
        pointed = Path(os.path.realpath(candidate))
    except ValueError as exc:  # NUL, unencodable text
        raise PathNotFoundError(f"path cannot be resolved: {_shown(path)} ({_shown(exc)})") from None
    root = next((r for r in resolved_roots if _is_within(pointed, r)), None)
    if root is None:
        raise PathOutsideRootError(_outside_message(path, resolved_roots))
    try:
        resolved = candidate.resolve(strict=True)
    except FileNotFoundError:
        raise PathNotFoundError(f"path does not exist: {_shown(path)}") from None
    except OSError as exc:  # "Not a directory", permissions, loops (3.13+): inside the root
        raise PathNotFoundError(f"path cannot be resolved: {_shown(path)} ({exc.strerror})") from None
    except RuntimeError:  # pathlib's symlink loop error names the absolute path: not shown
        raise PathNotFoundError(f"path cannot be resolved: {_shown(path)} (a symlink loop)") from None
    if not _is_within(resolved, root):  # changed between the two looks: still never outside
        raise PathOutsideRootError(_outside_message(path, resolved_roots))
    if not (resolved.is_file() or resolved.is_dir()):
        # A FIFO would block the search until its timeout; a device could be endless.
        raise PathNotFoundError(
            f"path is not a regular file or directory: {_shown(path)} (FIFOs, sockets and devices cannot be searched)"
        )
    rel = resolved.relative_to(root).as_posix()
    return SearchLocation(root, None if rel == "." else rel)


def searched_roots(roots: list[Path]) -> list[Path]:
    """The roots a search with no `path` covers: every allowed root, resolved, in order, less
    one lying inside another (searching the outer one covers its files, which would otherwise
    be found twice) or named twice. PathNotFoundError if one is not a directory: a search that
    silently skipped it would answer for less than the codebase it claims to cover."""
    if not roots:
        raise PathOutsideRootError("no search roots are configured; start the server with --root DIR")
    resolved = list(dict.fromkeys(Path(r).resolve() for r in roots))
    for root in resolved:
        if not root.is_dir():
            raise PathNotFoundError(
                f"search root does not exist or is not a directory: {root}; pass a path inside another root"
            )
    return [r for r in resolved if not any(o != r and _is_within(r, o) for o in resolved)]


def _outside_message(path: object, roots: list[Path]) -> str:
    names = ", ".join(str(r) for r in roots)
    return f"path {_shown(path)} is outside the allowed roots ({names}); pass a path inside them or omit it"


def _shown(text: object) -> str:
    """`text` safe to put in a message: undecodable bytes and lone surrogates as escapes."""
    return str(text).encode("utf-8", "backslashreplace").decode("utf-8")
