"""Which files a search may look at: one rule set for every search mode.

Regex search (rg walking the tree itself) and semantic indexing (`discover`) must see the same
files, or hybrid results would disagree with their own parts. Both therefore take their
ripgrep walk flags from `selection_args`:

- ripgrep's ignore semantics: nested `.gitignore` (also outside a git checkout: a tarball's
  `.gitignore` still says what is generated), `.ignore`, `.rgignore`; hidden files and
  symlinks skipped;
- the caller's include globs, then the default excludes and the caller's exclude globs (later
  globs win in ripgrep, so an exclude always beats an include). Globs are ripgrep's `--glob`,
  kept as they are for parity with rg: gitignore syntax relative to the root, and an include
  glob also re-admits a file that an ignore file or hiding would skip (the way to search an
  ignored file on purpose), though not the inside of a directory those rules pruned;
- files over `EngineConfig.max_file_size` skipped;
- binary files skipped. rg decides that itself while searching (a NUL byte in what it reads;
  see `regex.py`); `discover` cannot afford to read whole files on every incremental pass, so
  it sniffs the first `BINARY_SNIFF_BYTES`, the size of rg's own first read, which agrees with
  rg for every file whose NUL (if any) lies in that window — in practice all real binaries.

Paths are relative to the search root with forward slashes. A name that is not valid UTF-8
is shown with backslash escapes (`caf\\xe9.py`): JSON and MCP cannot carry the raw bytes, and
the escapes keep such names distinct and readable.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from search_engine.config import EngineConfig
from search_engine.paths import SearchLocation
from search_engine.ripgrep import RipgrepRun

BINARY_SNIFF_BYTES = 64 * 1024
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


@dataclass(frozen=True, slots=True)
class DiscoveredFile:
    """A searchable file. `path` is the display path (relative, posix) that matches carry;
    `os_path` is the absolute path to open it by (exact bytes, even for non-UTF-8 names).
    `size` and `mtime_ns` let an incremental indexer skip unchanged files."""

    path: str
    os_path: Path
    size: int
    mtime_ns: int


def selection_args(config: EngineConfig, include: Sequence[str], exclude: Sequence[str]) -> list[str]:
    """The ripgrep flags that select files, shared by `rg --files` and `rg --json`."""
    args = ["--no-config", "--no-require-git", "--max-filesize", str(config.max_file_size)]
    for glob in include:
        args += ["--glob", glob]
    for glob in (*config.default_excludes, *exclude):
        args += ["--glob", "!" + glob]
    return args


def display_path(raw: bytes) -> str:
    """How a path ripgrep printed as bytes is shown everywhere (see the module docstring)."""
    return raw.decode("utf-8", "backslashreplace")


def discover(
    location: SearchLocation,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    config: EngineConfig | None = None,
) -> list[DiscoveredFile]:
    """Every searchable file under `location`, sorted by path (deterministic across runs)."""
    config = config or EngineConfig()
    args = ["--files", "--null", *selection_args(config, include, exclude)]
    if location.sub:
        args += ["--", location.sub]
    with RipgrepRun(args, location.root, config.timeout_s) as run:
        listing = b"".join(run.records(b"\0"))
        run.warnings(produced_output=bool(listing))
    found = []
    for raw in listing.split(b"\0"):
        if not raw:
            continue
        os_path = location.root / os.fsdecode(raw)
        described = _describe(os_path, config.max_file_size)
        if described is not None:
            found.append(DiscoveredFile(display_path(raw), os_path, *described))
    found.sort(key=lambda f: f.path)
    return found


def _describe(os_path: Path, max_size: int) -> tuple[int, int] | None:
    """(size, mtime_ns) of a regular, small enough, non-binary file; None to skip it.

    Re-checked here because the tree may change between rg's walk and this call, and the file
    is opened without following symlinks so a swapped-in link cannot lead outside the root.
    """
    try:
        fd = os.open(os_path, os.O_RDONLY | _O_NOFOLLOW)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_size:
            return None
        if b"\0" in os.read(fd, BINARY_SNIFF_BYTES):
            return None
        return st.st_size, st.st_mtime_ns
    except OSError:
        return None
    finally:
        os.close(fd)
