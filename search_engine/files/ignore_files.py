"""The ignore files ripgrep would read for a walk, checked before it reads any of them.

rg reads every `.gitignore`, `.ignore` and `.rgignore` in each folder it walks and in every
folder above the one it starts from (and `.git/info/exclude` where a folder holds a
repository), and it follows links to do so, opening whatever the link names and reading it to
the end. git stores links, so a cloned repository decides what that is: `.gitignore ->
/proc/self/fd/1` had rg read its own output pipe, waiting for itself until the search's
time limit (every regex search, and discovery, so the index was never built);
`sub/.ignore -> /dev/zero` had it read until its memory ran out. A FIFO or a device in an
ignore file's place (an unpacked archive, or someone who can write there) does the same.

So a walk first looks at every such file rg would open: the folders it would walk (all of
them, ignore rules aside: which folders an ignore file prunes is only known by reading it)
and the folders above. An ignore file in the searched tree is read by rg only if it is a
regular file of at most `MAX_IGNORE_FILE_BYTES` whose real path, links resolved, lies inside
the root (what git itself does is stricter: since 2.32 it reads no `.gitignore` through a
link at all); one above the tree must resolve to such a file anywhere but in `/proc`, `/sys`
or `/dev`. A directory so named is harmless (rg cannot read it and says so). For anything
else, rg is told not to read that kind of ignore file in this walk (`--no-ignore-vcs`,
`--no-ignore-dot`, `--no-ignore-exclude`: measured, these stop the read everywhere, while
`--no-ignore-parent` still reads the folders above), and the answer says which file was not
read, why, and what that means for it. Turning off the kind rather than the one file is what
rg allows: it has no flag that skips one file.

The look lists every folder (`folder_listing.py`, which remembers a folder's listing while
its stamp holds: an unchanged tree costs a `lstat` a folder) and looks at each ignore file
every time. What it cannot see is a file swapped after it looked and before rg reads it; rg's
output is a socket, not a pipe, so `/proc/self/fd/1` cannot be reopened, and rg's time and
memory limits hold whatever it reads (`regex/ripgrep.py`). The stamps it saw make `tree`, by which
the notices of what a walk left out are kept (`skipped.py`).
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import re
import stat
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from search_engine.errors import SearchTimeoutError
from search_engine.files.folder_listing import list_folder
from search_engine.files.paths import SearchLocation

#: The largest ignore file rg is given to read: real ones are a few KB (a generated one for a
#: large monorepo, tens of KB); rg holds every line of one as a glob in memory.
MAX_IGNORE_FILE_BYTES = 1 << 20
#: The rg flag that keeps it from reading each kind of ignore file, in the walked tree and above.
IGNORE_FILE_FLAGS = {".gitignore": "--no-ignore-vcs", ".ignore": "--no-ignore-dot", ".rgignore": "--no-ignore-dot"}
GIT_EXCLUDE = ".git/info/exclude"
_EXCLUDE_FLAG = "--no-ignore-exclude"
#: What each flag leaves out of the walk, for the warning.
_WHAT_IS_OFF = {
    "--no-ignore-vcs": "no .gitignore rules (nor .git/info/exclude or git's global excludes) apply to this search",
    "--no-ignore-dot": "no .ignore or .rgignore rules apply to this search",
    _EXCLUDE_FLAG: "no .git/info/exclude rules apply to this search",
}
#: Where a link above the tree may not lead: files there are not what their size says.
_SPECIAL_TREES = ("/proc/", "/sys/", "/dev/")
_SHOWN_FILES = 3


@dataclass(frozen=True, slots=True)
class IgnoreFiles:
    """What a walk must not read: the rg flags that turn those kinds of ignore file off, and
    one warning per flag naming the files and why they were refused. `tree`: a digest of every
    folder the look listed and every ignore file it looked at (stamps, not contents), equal
    only while what the walk would leave out is the same (`skipped.py` keeps its notices by
    it); None while some folder is still changing."""

    flags: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    tree: int | None = None


@dataclass(frozen=True, slots=True)
class _Refused:
    shown: str
    why: str
    flag: str


def check_ignore_files(
    location: SearchLocation,
    *,
    hidden: bool,
    pruned_names: Sequence[str],
    pruned_paths: Iterable[Path],
    deadline: float,
) -> IgnoreFiles:
    """Check every ignore file a walk of `location` would read (see the module docstring).

    `hidden`: whether rg may enter hidden folders (include globs can take it into them);
    `pruned_names`: the exclude globs (the default ones and the caller's), which rg applies
    after every include glob, so it never enters a folder one of them names; those that are
    surely a folder-name glob (`_NAME_GLOB`) are not entered here either, the others are
    (a look at more folders than rg walks is only slower). `pruned_paths`: folders rg never
    enters (codepager's cache). Past `deadline` (by `time.monotonic`) the look raises
    SearchTimeoutError, as the search would."""
    look = _Look(os.path.realpath(location.root), hidden, pruned_names, {str(p) for p in pruned_paths}, deadline)
    target = location.target
    if target.is_dir():
        look.walk(str(target))
        above = target.parents
    else:
        above = (target.parent, *target.parent.parents)
    for folder in above:
        look.folder_above(folder, inside=folder == location.root or location.root in folder.parents)
    return look.verdict()


class _Look:
    """The folders rg could walk under one top and the folders above it, the ignore files in
    them it would read, and the stamps of all of them."""

    def __init__(self, root: str, hidden: bool, pruned_names: Sequence[str], pruned: set[str], deadline: float) -> None:
        self.root = root
        self.hidden = hidden
        names = [n for n in pruned_names if _NAME_GLOB.fullmatch(n)]
        literal = [n for n in names if not any(c in n for c in "*?[")]
        self.pruned_literal = frozenset(literal)
        globs = [n for n in names if n not in literal]
        self.pruned_glob = re.compile("|".join(fnmatch.translate(g) for g in globs)) if globs else None
        self.pruned = pruned
        self.deadline = deadline
        self.refused: list[_Refused] = []
        self.stamps: list[object] = []
        self.settled = True

    def walk(self, top: str) -> None:
        stack = [top]
        while stack:
            if time.monotonic() > self.deadline:
                raise SearchTimeoutError(
                    "listing the folders to search took longer than search.timeout_s; search a sub-path, "
                    "or raise search.timeout_s"
                )
            folder = stack.pop()
            listing = list_folder(folder)
            if listing is None:  # unreadable or gone: rg cannot walk it either (and says so)
                continue
            self.stamps.append((folder, listing.stamp))
            self.settled = self.settled and listing.settled
            for name in listing.dotted:
                if name in IGNORE_FILE_FLAGS:
                    self._check(os.path.join(folder, name), IGNORE_FILE_FLAGS[name], inside=True)
            for name in listing.folders:
                if name == ".git":
                    self._check(os.path.join(folder, GIT_EXCLUDE), _EXCLUDE_FLAG, inside=True)
                elif self._enters(folder, name):
                    stack.append(os.path.join(folder, name))

    def folder_above(self, folder: Path, *, inside: bool) -> None:
        """A folder above the walked one: rg reads its ignore files too (and whether it holds a
        repository decides which apply, hence its own stamp)."""
        with contextlib.suppress(OSError):
            self.stamps.append((str(folder), _stamp(os.lstat(folder))))
        for name, flag in (*IGNORE_FILE_FLAGS.items(), (GIT_EXCLUDE, _EXCLUDE_FLAG)):
            self._check(str(folder / name), flag, inside=inside)

    def _check(self, path: str, flag: str, *, inside: bool) -> None:
        why, stamp = _why_refused(path, self.root if inside else None)
        self.stamps.append((path, stamp))
        if why is not None:
            self.refused.append(_Refused(_shown(path, self.root), why, flag))

    def _enters(self, folder: str, name: str) -> bool:
        if (name[0] == "." and not self.hidden) or name in self.pruned_literal:
            return False
        if self.pruned_glob is not None and self.pruned_glob.match(name):
            return False
        return os.path.join(folder, name) not in self.pruned

    def verdict(self) -> IgnoreFiles:
        by_flag: dict[str, list[_Refused]] = {}
        for item in self.refused:
            by_flag.setdefault(item.flag, []).append(item)
        warnings = []
        for flag, items in by_flag.items():
            named = "; ".join(f"{r.shown} is {r.why}" for r in items[:_SHOWN_FILES])
            more = f" (and {len(items) - _SHOWN_FILES} more)" if len(items) > _SHOWN_FILES else ""
            warnings.append(
                f"an ignore file was not read: {named}{more}. So {_WHAT_IS_OFF[flag]}, and the results may hold "
                "files those rules would leave out (exclude_patterns leaves them out)"
            )
        return IgnoreFiles(tuple(by_flag), tuple(warnings), hash(tuple(self.stamps)) if self.settled else None)


# A glob that names a file or folder by its name alone, in which rg's syntax and fnmatch's
# agree: no `/` (a path), no `\` (an escape in rg, a character in fnmatch), no `{` (rg's
# alternatives), no `!` or `^` (negations), a class closed once. Others are not pruned here.
_NAME_GLOB = re.compile(r"[^/\\{}!^\[\]]*(?:\[[^/\\{}!^\[\]]+\][^/\\{}!^\[\]]*)*")


def _stamp(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _why_refused(path: str, root: str | None) -> tuple[str | None, object]:
    """Why rg must not read the ignore file at `path` (None when it may: a regular file small
    enough, a folder, nothing), and the stamps of what was looked at. Inside the searched tree
    (`root` given) a link must lead to such a file inside `root` (a dangling one is harmless:
    rg cannot open it either); above the tree (`root` None) it may lead anywhere but a special
    file system, and must resolve (a `/proc` magic link need not, though rg can open it)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None, None
    if not stat.S_ISLNK(st.st_mode):
        return _why_not_regular(st), _stamp(st)
    try:
        real = os.path.realpath(path, strict=root is None)
        if root is not None and real != root and not real.startswith(root + os.sep):
            return f"a link that leads out of the root, to {_quoted(os.readlink(path))}", _stamp(st)
        if root is None and real.startswith(_SPECIAL_TREES):
            return f"a link to {_quoted(real)}", _stamp(st)
        target = os.stat(real)
    except OSError:  # dangling, or a loop
        dangling = (
            None if root is not None else f"a link that does not resolve to a file ({_quoted(os.readlink(path))})"
        )
        return dangling, _stamp(st)
    return _why_not_regular(target), (_stamp(st), _stamp(target))


def _why_not_regular(st: os.stat_result) -> str | None:
    if stat.S_ISDIR(st.st_mode):
        return None
    if stat.S_ISFIFO(st.st_mode):
        return "a FIFO, which would hold the search until its time limit"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file (a device or a socket)"
    if st.st_size > MAX_IGNORE_FILE_BYTES:
        return f"{st.st_size:,} bytes, over the {MAX_IGNORE_FILE_BYTES:,} an ignore file may have"
    return None


def _shown(path: str, root: str) -> str:
    """`path` relative to the root when inside it (as every path of an answer is), else whole."""
    rel = os.path.relpath(path, root)
    return _quoted(path if rel.startswith("..") else rel.replace(os.sep, "/"))


def _quoted(text: str) -> str:
    """`text` as it is when printable, else escaped (a link's target is the repository's to
    choose, control characters included)."""
    return text if text.isprintable() else ascii(text)
