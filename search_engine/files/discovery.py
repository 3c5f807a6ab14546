"""Which files a search may look at: one rule set for every search mode.

Regex search (rg walking the tree itself) and semantic indexing (`discover`) must see the same
files, or hybrid results would disagree with their own parts. Both therefore take their
ripgrep walk from `plan_walk`:

- ripgrep's ignore semantics, exactly as plain `rg` applies them: `.gitignore` (with
  `.git/info/exclude` and git's global excludes file) only inside a git repository, from its
  top down, those in folders above the root included; `.ignore` and `.rgignore` anywhere,
  those above the root included; hidden files and symlinks skipped. Outside any repository no
  `.gitignore` applies: a virtual environment (uv's, Python 3.13's) says `*` in its own, and
  `--no-require-git` used to apply that to every package under it, so searching an installed
  library found nothing while `rg` found everything;
- only ignore files rg can read safely: each is checked before rg runs (`ignore_files.py`),
  and a kind of ignore file one of which is a link out of the root, a FIFO or a device is not
  read in that walk, with a warning saying so;
- codepager's own cache dir, when a root holds it (`_Cache`);
- the caller's include globs, then the default excludes and the caller's exclude globs (later
  globs win in ripgrep, so an exclude always beats an include). Globs are ripgrep's `--glob`,
  kept as they are for parity with rg: gitignore syntax relative to the root, and an include
  glob also re-admits a file that an ignore file or hiding would skip (the way to search an
  ignored file on purpose), though not the inside of a directory those rules pruned;
- files over `EngineConfig.max_file_size` skipped;
- bytes read as they are (`--encoding none`: no BOM sniffing, so a UTF-16 file, full of NULs,
  is binary and byte offsets are the file's own);
- binary files skipped. rg decides that itself while searching (a NUL byte in what it reads;
  see `regex/search.py`); `discover` cannot afford to read whole files on every incremental pass, so
  it sniffs the first `BINARY_SNIFF_BYTES`, the size of rg's own first read, which agrees with
  rg for every file whose NUL (if any) lies in that window — in practice all real binaries.

What the ignore rules and the minified-file excludes left out is counted from rg's debug log
and said in the answer (`skipped.py`), with how to search it.

Paths are relative to the search root with forward slashes. A name that is not valid UTF-8
is shown with backslash escapes (`caf\\xe9.py`, a real backslash doubled): JSON and MCP cannot
carry the raw bytes, and the escapes keep such names distinct and readable. One that shows as
another file's real name is left out (`shown_path`), so a shown path names one file.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import logging
import os
import re
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from infra import BeneathWalk, open_beneath
from search_engine.config import INDEXES_DIR, EngineConfig
from search_engine.errors import PathNotFoundError, PathOutsideRootError
from search_engine.files.ignore_files import check_ignore_files
from search_engine.files.paths import SearchLocation
from search_engine.files.skipped import Skipped, recall, remember
from search_engine.regex.ripgrep import RipgrepRun

log = logging.getLogger(__name__)

BINARY_SNIFF_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class DiscoveredFile:
    """A searchable file. `path` is the display path (relative, posix) that matches carry;
    `rel` is the same path as the file system spells it (exact bytes, even for non-UTF-8
    names), to open under `root` with `infra.beneath`. `size` and `mtime_ns` let an
    incremental indexer skip unchanged files."""

    path: str
    root: Path
    rel: str
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class Walk:
    """The ripgrep arguments that select the files of a location, shared by `rg --files` and
    `rg --json`, and the warnings the answer carries about them (ignore files not read).
    `key` names what the walk leaves out while the tree stays as it is (None while it is
    changing), and `known` is what the answer says of that when it was seen before."""

    args: list[str]
    warnings: tuple[str, ...] = ()
    key: int | None = None
    known: tuple[str, ...] | None = None

    def command(self, mode: Sequence[str]) -> list[str]:
        """rg's whole command line: `mode`'s arguments, `--debug` when what the walk leaves out
        is not known yet (`skipped.py`), then the walk's."""
        return [*mode, *(() if self.known is not None else ("--debug",)), *self.args]

    def notices(self, skipped: Skipped) -> list[str]:
        """What the rules left out, and how to search it: known, or read from this run."""
        return list(self.known) if self.known is not None else remember(self.key, skipped)


def plan_walk(location: SearchLocation, config: EngineConfig, include: Sequence[str], exclude: Sequence[str]) -> Walk:
    """The walk of `location`: the flags, then the named path if any (last: rg takes no flag
    after `--`). PathOutsideRootError if that path lies in codepager's cache: rg searches a
    path it is named whatever the globs say, and the cache holds the cursor key. The ignore
    files rg would read are checked first (`ignore_files.py`), which may turn some kinds off."""
    cache = _Cache.within(location.root, config.cache_dir, config.cache_entries)
    if location.sub and cache.holds(location):
        raise PathOutsideRootError(
            f"path {location.sub!r} is in codepager's own cache (index.cache_dir), which is never searched; "
            "search another path"
        )
    ignores = check_ignore_files(
        location,
        hidden=bool(include),  # an include glob can take rg into a hidden folder
        pruned_names=(*config.default_excludes, *exclude),
        pruned_paths=[cache.root / path for path in cache.paths],
        deadline=time.monotonic() + config.timeout_s,
    )
    # `--encoding none`: bytes as they are. rg otherwise transcodes a file starting with a BOM
    # and reports offsets into the transcoded text (3 bytes early after a UTF-8 BOM, anywhere
    # in UTF-16), and searches UTF-16 text that `discover` rightly calls binary (NULs).
    args = ["--no-config", "--encoding", "none", "--max-filesize", str(config.max_file_size)]
    args += ignores.flags
    for glob in include:
        args += ["--glob", glob]
    for glob in (*config.default_excludes, *cache.globs(), *exclude):
        args += ["--glob", "!" + glob]
    if location.sub:
        args += ["--", location.sub]
    key = None if ignores.tree is None else hash((str(location.root), *args, ignores.tree))
    return Walk(args, ignores.warnings, key, recall(key))


#: What a glob gives a meaning to, escaped in a path used as a glob.
_GLOB_SPECIAL = re.compile(r"[\\*?\[\]{}]")


@dataclass(frozen=True, slots=True)
class _Cache:
    """What of codepager's cache lies in a root, relative to it: the cache dir when it is inside
    the root, what codepager keeps there (`INDEXES_DIR` and the caller's `cache_entries`) when it is
    the root itself. Left out of every walk: a regex search showed the cursor key (the secret
    cursors are sealed with) to anyone who may search, and every update indexed its own output
    and never settled."""

    root: Path
    paths: tuple[PurePosixPath, ...] = ()
    patterns: tuple[str, ...] = ()

    @classmethod
    def within(cls, root: Path, cache_dir: Path, entries: tuple[str, ...] = ()) -> _Cache:
        root = root.resolve()  # a root reached through a link still holds the cache
        try:
            inside = Path(cache_dir).resolve().relative_to(root)
        except ValueError:
            return cls(root)
        if inside.parts:
            return cls(root, (PurePosixPath(inside.as_posix()),))
        names = [INDEXES_DIR, *(e for e in entries if not _GLOB_SPECIAL.search(e))]
        return cls(root, tuple(map(PurePosixPath, names)), tuple(e for e in entries if _GLOB_SPECIAL.search(e)))

    def globs(self) -> list[str]:
        # Escaped: a directory named `idx[1]` or `cache[` is a glob otherwise, one that missed
        # the directory (indexed on every update) or that rg refused (no index at all).
        escaped = [_GLOB_SPECIAL.sub(lambda m: "\\" + m[0], p.as_posix()) for p in self.paths]
        return [f"/{e}{tail}" for e in escaped for tail in ("", "/**")] + [f"/{p}" for p in self.patterns]

    def holds(self, location: SearchLocation) -> bool:
        """Whether the path `location` names is in the cache, by file identity: a file system
        that ignores case (macOS, Windows) opens `Cache/CURSOR.KEY` as the key, whatever the
        spelling. The key's temporary files are matched by name, ignoring case."""
        named = PurePosixPath(location.sub or ".")
        if any(fnmatch.fnmatch(top.lower(), p.lower()) for top in named.parts[:1] for p in self.patterns):
            return True
        marks = []
        for path in self.paths:
            with contextlib.suppress(OSError):
                marks.append(os.stat(self.root / path))
        if not marks:
            return False
        for part in (named, *named.parents[:-1]):
            try:
                st = os.stat(location.root / part)
            except OSError:
                continue
            if any(os.path.samestat(st, mark) for mark in marks):
                return True
        return False


def display_path(raw: bytes) -> str:
    """How a path ripgrep printed as bytes is shown everywhere (see the module docstring).

    A name that is not UTF-8 shows each byte outside a UTF-8 character as `\\xNN` and a real
    backslash as `\\\\` (a backslash byte is never inside one): one spelling per name, where
    backslashreplace alone showed `a<E9>\\xe9` and `a\\xe9<E9>` alike."""
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return raw.replace(b"\\", b"\\\\").decode("utf-8", "backslashreplace")


def shown_path(root: Path, raw: bytes) -> str | None:
    """`display_path(raw)` for a file under `root`, or None when its name is not UTF-8 and a
    file really has the name it shows as. The shown path names that other file (it is what a
    caller passing the path gets), so this one is left out, by discovery and regex search
    alike: the index keys files by shown path, and such a pair corrupted it (every semantic
    search then failed, every update crashed)."""
    try:
        return raw.decode()
    except UnicodeDecodeError:
        path = display_path(raw)
    if not os.path.lexists(root / path):
        return path
    _left_out(str(root), os.fsdecode(raw), path)
    return None


@functools.lru_cache(maxsize=1024)
def _left_out(root: str, rel: str, path: str) -> None:
    """Say once per process which file of `root` was left out: discovery runs on every update
    and on every ranked search with include or exclude patterns, and regex search on every call."""
    log.warning("leaving out %r in %s: its name shows as %s, the name of another file", rel, root, path)


@dataclass(frozen=True, slots=True)
class Discovery:
    """The searchable files of a location, sorted by path, and what an answer about them must
    say: `warnings`, ignore files not read; `notices`, what the ignore rules and the minified
    excludes left out (`SearchResult`'s two lists)."""

    files: list[DiscoveredFile]
    warnings: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)


def discover(
    location: SearchLocation,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    config: EngineConfig | None = None,
) -> Discovery:
    """Every searchable file under `location`, sorted by path (deterministic across runs)."""
    config = config or EngineConfig()
    walk = plan_walk(location, config, include, exclude)
    with RipgrepRun(walk.command(["--files", "--null"]), location.root, config) as run:
        listing = b"".join(run.records(b"\0"))
        run.warnings(produced_output=bool(listing))
    warnings, notices = list(walk.warnings), walk.notices(run.skipped)
    found: list[DiscoveredFile] = []
    try:
        beneath = BeneathWalk(location.root)
    except OSError:  # the root itself went away since rg listed it: nothing to describe
        return Discovery(found, warnings, notices)
    # Sorted, so files of one directory are described one after another and the walk opens
    # each directory once.
    with beneath:
        for raw in sorted(listing.split(b"\0")):
            if not raw:
                continue
            path = shown_path(location.root, raw)
            if path is None:
                continue
            rel = os.fsdecode(raw)
            described = _describe(beneath, rel, config.max_file_size)
            if described is not None:
                found.append(DiscoveredFile(path, location.root, rel, *described))
    # Shown paths of names that are not UTF-8 can sort apart from their bytes.
    found.sort(key=lambda f: f.path)
    return Discovery(found, warnings, notices)


def _describe(walk: BeneathWalk, rel: str, max_size: int) -> tuple[int, int] | None:
    """(size, mtime_ns) of a regular, small enough, non-binary file; None to skip it.

    Re-checked here because the tree may change between rg's walk and this call; opened
    beneath the root, so a directory swapped for a link cannot lead outside it.
    """
    try:
        fd = walk.open(rel)
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


def explicit_file_warning(location: SearchLocation, max_size: int) -> str | None:
    """Why the file a caller named cannot be searched: it is over `max_size` bytes (None when
    it is not, or `location` is a directory or the whole root).

    ripgrep applies `--max-filesize` only to files it finds by walking, never to a path on its
    command line, so a named file is measured here, on a descriptor opened beneath the root.
    A path that no longer opens that way (replaced by a symlink, removed) or is no longer a
    file or directory since it was resolved raises PathNotFoundError rather than being handed
    to rg, which would follow the link or wait on a FIFO.
    """
    if location.sub is None:
        return None
    try:
        fd = open_beneath(location.root, location.sub)
    except OSError as exc:
        raise PathNotFoundError(
            f"path {location.sub} no longer opens inside the root ({exc.strerror}): it was removed or "
            "replaced by a symlink since it was checked; check the path and search again"
        ) from None
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if stat.S_ISDIR(st.st_mode):
        return None
    if not stat.S_ISREG(st.st_mode):  # a FIFO, socket or device: rg would wait on it until its timeout
        raise PathNotFoundError(
            f"path {location.sub} is not a regular file or directory (a FIFO, socket or device is never "
            "searched); name a file or directory"
        )
    if st.st_size <= max_size:
        return None
    return (
        f"{location.sub} was not searched: it is {st.st_size:,} bytes, over search.max_file_size "
        f"({max_size:,} bytes); raise search.max_file_size (CODEPAGER_SEARCH__MAX_FILE_SIZE) to search it"
    )
