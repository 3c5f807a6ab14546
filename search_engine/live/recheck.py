"""Re-checking matches against the files as they are now, so a page served later than its
search never shows old lines as current.

A session keeps a search's whole list; its later pages are cut from it, possibly after the
files changed. Before such a page is served, each match is looked up in its file (every search
mode, every session store, a restored session alike):

- its text is still on its lines: served as it is;
- its text is elsewhere in the file (lines inserted or removed above it): served at its new
  lines, with `changed = "moved"` (the copy nearest to the old place; a moved regex match's
  bytes then span its line, not just the matched part);
- its text is nowhere in the file: kept at its place, with `changed = "edited"`, so an agent
  knows to search again;
- the file is gone or unreadable: `changed = "deleted"`.

Reading is bounded: at most `max_file_size` bytes a file (larger files are never searched) and
`RECHECK_BUDGET` bytes a page; matches past the budget are marked `changed = "unchecked"`.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from infra import read_beneath
from search_engine.models import Match
from search_engine.regex.search import ELLIPSIS

RECHECK_BUDGET = 64 << 20
# Copies of a match's text looked at in its file when choosing the one nearest its old place.
_MAX_COPIES = 1000


def recheck(root: str, matches: Sequence[Match], max_file_size: int) -> list[Match]:
    """`matches` as the files under `root` hold them now (see the module docstring)."""
    files: dict[str, _File | None] = {}
    budget = RECHECK_BUDGET
    out: list[Match] = []
    for m in matches:
        if m.path not in files:
            if budget <= 0:
                out.append(msgspec.structs.replace(m, changed="unchecked"))
                continue
            data = read_beneath(root, m.path, max_file_size)
            files[m.path] = None if data is None else _File(data)
            budget -= len(data or b"")
        out.append(_placed(m, files[m.path]))
    return out


class _File:
    """A file's bytes and the offset each of its lines starts at."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.starts = [0]
        at = data.find(b"\n")
        while at >= 0:
            self.starts.append(at + 1)
            at = data.find(b"\n", at + 1)

    def span(self, line_start: int, line_end: int) -> tuple[int, int]:
        """The bytes of lines `line_start`..`line_end` (1-based, inclusive)."""
        starts, end = self.starts, len(self.data)
        return (starts[line_start - 1] if line_start <= len(starts) else end), (
            starts[line_end] if line_end < len(starts) else end
        )


def _placed(m: Match, file: _File | None) -> Match:
    if file is None:
        return msgspec.structs.replace(m, changed="deleted")
    core = max(m.content.split(ELLIPSIS), key=len).encode()
    data = file.data
    first, last = file.span(m.line_start, m.line_end)
    if not core or core in data[first:last]:
        return m
    best, found, at = -1, 0, data.find(core)
    while at >= 0 and found < _MAX_COPIES:
        if best < 0 or abs(at - first) < abs(best - first):
            best = at
        found += 1
        at = data.find(core, at + 1)
    if best < 0:
        return msgspec.structs.replace(m, changed="edited")
    line = data.count(b"\n", 0, best) + 1
    # A chunk's bytes are its text; a regex match's are now those of its line.
    byte_start = best if m.byte_end - m.byte_start == len(core) else data.rfind(b"\n", 0, best) + 1
    return msgspec.structs.replace(
        m,
        line_start=line,
        line_end=line + m.line_end - m.line_start,
        byte_start=byte_start,
        byte_end=best + len(core),
        changed="moved",
    )
