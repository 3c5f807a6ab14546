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

The look costs one `scandir` per folder (a few milliseconds for 8,000 files). What it cannot
see is a file swapped after it looked and before rg reads it; rg's output is a socket, not a
pipe, so `/proc/self/fd/1` cannot be reopened, and rg's time and memory limits hold whatever
it reads (`ripgrep.py`).
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from search_engine.errors import SearchTimeoutError
from search_engine.paths import SearchLocation

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
    one warning per flag naming the files and why they were refused."""

    flags: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


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
    `pruned_names` are globs of folder names rg never enters (the default excludes),
    `pruned_paths` folders it never enters (codepager's cache). Past `deadline` (by
    `time.monotonic`) the look raises SearchTimeoutError, as the search would."""
    root = os.path.realpath(location.root)
    target = location.target
    refused: list[_Refused] = []
    if target.is_dir():
        walk = _Walk(root, hidden, pruned_names, {str(p) for p in pruned_paths}, deadline)
        refused += walk.run(str(target))
        above = target.parents
    else:
        above = (target.parent, *target.parent.parents)
    for folder in above:
        inside = folder == location.root or location.root in folder.parents
        for name, flag in (*IGNORE_FILE_FLAGS.items(), (GIT_EXCLUDE, _EXCLUDE_FLAG)):
            path = str(folder / name)
            why = _why_refused(path, root) if inside else _why_refused_above(path)
            if why is not None:
                refused.append(_Refused(_shown(path, root), why, flag))
    return _verdict(refused)


class _Walk:
    """The folders rg could walk under one top, and the ignore files in them it would read."""

    def __init__(self, root: str, hidden: bool, pruned_names: Sequence[str], pruned: set[str], deadline: float) -> None:
        self.root = root
        self.hidden = hidden
        literal = [n for n in pruned_names if "/" not in n and not _GLOB.search(n)]
        self.pruned_literal = frozenset(literal)
        globs = [n for n in pruned_names if "/" not in n and n not in literal]
        self.pruned_glob = re.compile("|".join(fnmatch.translate(g) for g in globs)) if globs else None
        self.pruned = pruned
        self.deadline = deadline

    def run(self, top: str) -> list[_Refused]:
        refused: list[_Refused] = []
        stack = [top]
        while stack:
            if time.monotonic() > self.deadline:
                raise SearchTimeoutError(
                    "listing the folders to search took longer than search.timeout_s; search a sub-path, "
                    "or raise search.timeout_s"
                )
            try:
                entries = os.scandir(stack.pop())
            except OSError:  # unreadable or gone: rg cannot walk it either (and says so)
                continue
            with entries:
                for entry in entries:
                    name = entry.name
                    if name in IGNORE_FILE_FLAGS:
                        why = _why_refused(entry.path, self.root)
                        if why is not None:
                            refused.append(_Refused(_shown(entry.path, self.root), why, IGNORE_FILE_FLAGS[name]))
                    elif name == ".git":
                        exclude = os.path.join(entry.path, "info", "exclude")
                        why = _why_refused(exclude, self.root) if entry.is_dir(follow_symlinks=False) else None
                        if why is not None:
                            refused.append(_Refused(_shown(exclude, self.root), why, _EXCLUDE_FLAG))
                    elif self._enters(entry):
                        stack.append(entry.path)
        return refused

    def _enters(self, entry: os.DirEntry[str]) -> bool:
        name = entry.name
        if (name[0] == "." and not self.hidden) or name in self.pruned_literal:
            return False
        if not entry.is_dir(follow_symlinks=False):  # rg follows no link while walking
            return False
        if self.pruned_glob is not None and self.pruned_glob.match(name):
            return False
        return entry.path not in self.pruned


_GLOB = re.compile(r"[*?\[\]{}\\]")


def _why_refused(path: str, root: str) -> str | None:
    """Why rg must not read the ignore file at `path`, inside the searched tree: None when it
    is a regular file small enough, a link to one inside `root`, a folder, or nothing."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        real = os.path.realpath(path)
        if real != root and not real.startswith(root + os.sep):
            return f"a link that leads out of the root, to {_quoted(os.readlink(path))}"
        try:
            st = os.stat(real)
        except OSError:
            return None  # a dangling link inside the root: rg cannot open it either
    return _why_not_regular(st)


def _why_refused_above(path: str) -> str | None:
    """`_why_refused` for a folder above the tree: a link may lead anywhere but a special
    file system, and must resolve (a `/proc` magic link need not, though rg can open it)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        try:
            real = os.path.realpath(path, strict=True)
            st = os.stat(real)
        except OSError:
            return f"a link that does not resolve to a file ({_quoted(os.readlink(path))})"
        if real.startswith(_SPECIAL_TREES):
            return f"a link to {_quoted(real)}"
    return _why_not_regular(st)


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


def _verdict(refused: list[_Refused]) -> IgnoreFiles:
    flags: dict[str, list[_Refused]] = {}
    for item in refused:
        flags.setdefault(item.flag, []).append(item)
    warnings = []
    for flag, items in flags.items():
        named = "; ".join(f"{r.shown} is {r.why}" for r in items[:_SHOWN_FILES])
        more = f" (and {len(items) - _SHOWN_FILES} more)" if len(items) > _SHOWN_FILES else ""
        warnings.append(
            f"an ignore file was not read: {named}{more}. So {_WHAT_IS_OFF[flag]}, and the results may hold "
            "files those rules would leave out (exclude_patterns leaves them out)"
        )
    return IgnoreFiles(tuple(flags), tuple(warnings))


def _shown(path: str, root: str) -> str:
    """`path` relative to the root when inside it (as every path of an answer is), else whole."""
    rel = os.path.relpath(path, root)
    return _quoted(path if rel.startswith("..") else rel.replace(os.sep, "/"))


def _quoted(text: str) -> str:
    """`text` as it is when printable, else escaped (a link's target is the repository's to
    choose, control characters included)."""
    return text if text.isprintable() else ascii(text)
