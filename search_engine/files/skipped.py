"""What a walk left out by rule, and the notice that tells the agent so: `Skipped`.

An answer that holds nothing, or less than the tree does, must say when a rule is why: a
`.gitignore` saying `*` above the root (every uv virtual environment has one) made every
search of an installed package come back empty, with nothing to tell an agent that the files
were there. ripgrep alone knows which rule left out which file, and says so in its debug log
(`--debug`, which every walk passes; it costs a line of stderr per file or folder left out):

    ...: ignoring ./out: Ignore(IgnoreMatch(Gitignore(Glob { from: Some("./.gitignore"), original: "out/", ...
    ...: ignoring ./a.min.js: Ignore(IgnoreMatch(Override(Glob(Matched(Glob { from: None, original: "!*.min.js", ...

`Skipped` counts those lines: per ignore file, with its first rules, and the minified files
the default excludes leave out (`MINIFIED_GLOBS`). Other lines (hidden files, other globs,
binary files) are not counted: hidden files and the default excludes are documented, and a
file an include glob does not name was left out by the caller. The strings are rg's debug
rendering (Rust's escapes, so no control character is printed raw). The log is not an
interface rg promises: another rg version that words it otherwise gives no notice, never a
wrong one. A file name holding a line break can add a line of its own to the log, and so a
count to the notice; the notice is advice, never the result.

`--debug` costs rg ~9 ms of CPU on the standard library (a rare pattern's whole search takes
~25 ms), so it is passed only when what the walk leaves out is not known yet: the notices of a
walk are kept (`remember`, `recall`) by a key of its arguments and of the stamps of every
folder and ignore file it depends on (`ignore_files.IgnoreFiles.tree`), which any change to
what it would leave out changes (but an edit of git's global excludes file, which shows once
the tree changes). The first search of a tree, or of one just changed, pays.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from search_engine.config import MINIFIED_GLOBS

# Greedy up to the last `: Ignore(`: whatever a file name holds comes before what rg appended.
_LEFT_OUT = re.compile(
    rb"ignoring .*: Ignore\(IgnoreMatch\("
    rb'(?:Gitignore\(Glob \{ from: Some\("((?:[^"\\]|\\.)*)"\), original: "((?:[^"\\]|\\.)*)"'
    rb'|Override\(Glob\(Matched\(Glob \{ from: None, original: "!((?:[^"\\]|\\.)*)")'
)
_MINIFIED = frozenset(glob.encode() for glob in MINIFIED_GLOBS)
_FILES_SHOWN = 3
_RULES_SHOWN = 3
_RULE_CHARS = 40


@dataclass(slots=True)
class _RuleFile:
    count: int = 0
    rules: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Skipped:
    """What one walk left out by rule, fed rg's debug lines one at a time. `cut`: the log was
    longer than was read, so every count is a lower bound."""

    files: dict[str, _RuleFile] = field(default_factory=dict)
    minified: int = 0
    cut: bool = False

    def add(self, line: bytes) -> None:
        found = _LEFT_OUT.search(line)
        if found is None:
            return
        source, rule, glob = found.groups()
        if glob is not None:
            self.minified += glob in _MINIFIED
            return
        name = source.decode("utf-8", "replace").removeprefix("./")
        entry = self.files.setdefault(name, _RuleFile())
        entry.count += 1
        text = rule.decode("utf-8", "replace")
        if text not in entry.rules:  # the first rules in sorted order: rg's threads log in any order
            bisect.insort(entry.rules, text)
            del entry.rules[_RULES_SHOWN:]

    def notices(self) -> list[str]:
        """What the answer says of it: how many, by which files, and how to search them."""
        about = "at least " if self.cut else ""
        notices = []
        if self.files:
            ranked = sorted(self.files.items(), key=lambda item: (-item[1].count, item[0]))
            top, rest = ranked[:_FILES_SHOWN], ranked[_FILES_SHOWN:]
            shown = [f"{e.count:,} by {name} ({', '.join(map(_clipped, e.rules))})" for name, e in top]
            if rest:
                shown.append(f"{sum(e.count for _, e in rest):,} by {len(rest):,} other ignore files")
            total = sum(e.count for e in self.files.values())
            were = "file or folder was" if total == 1 else "files or folders were"
            notices.append(
                f"{about}{total:,} {were} left out by ignore rules: {'; '.join(shown)}. To search "
                'them, pass include_patterns that name them (["*"] takes in every ignored and hidden file; the '
                "default excludes still apply; --glob on the command line), or a file or folder of theirs as path"
            )
        if self.minified:
            were = "file was" if self.minified == 1 else "files were"
            notices.append(
                f"{about}{self.minified:,} minified {were} left out ({', '.join(MINIFIED_GLOBS)}, in the "
                "default excludes); to search one, pass it as path"
            )
        return notices


def _clipped(rule: str) -> str:
    return rule if len(rule) <= _RULE_CHARS else rule[: _RULE_CHARS - 1] + "…"


#: Walks whose notices are kept (a key and a few short strings each).
_KEPT = 256
_known: OrderedDict[int, tuple[str, ...]] = OrderedDict()
_lock = threading.Lock()


def recall(key: int | None) -> tuple[str, ...] | None:
    """The notices kept for the walk `key` names, or None if there are none (or no key)."""
    if key is None:
        return None
    with _lock:
        notices = _known.get(key)
        if notices is not None:
            _known.move_to_end(key)
        return notices


def remember(key: int | None, skipped: Skipped) -> list[str]:
    """`skipped`'s notices, kept for the walk `key` names unless the log was cut (its counts
    are then only a floor) or there is no key."""
    notices = skipped.notices()
    if key is not None and not skipped.cut:
        with _lock:
            _known[key] = tuple(notices)
            _known.move_to_end(key)
            while len(_known) > _KEPT:
                _known.popitem(last=False)
    return notices
