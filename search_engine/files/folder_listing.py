"""What a folder holds, as the look before each ripgrep walk needs it (`ignore_files.py`),
remembered while the folder is unchanged.

That look lists every folder rg may walk before every search: 3.3 ms for the standard
library's 300 folders, an eighth of a rare pattern's whole search. A folder's entries change
only with its modification time (creating, removing or renaming an entry sets it, replacing a
folder gives a new inode), so a listing is kept with the folder's stamp and reused while a
`lstat` gives the same one: a search of an unchanged tree costs a `lstat` a folder. A folder
modified within `SETTLED_NS` of being listed is listed again next time: a change in the same
tick of a coarse clock would otherwise leave its stamp as it was.
"""

from __future__ import annotations

import os
import stat
import struct
import threading
import time
from dataclasses import dataclass

#: A folder modified less than this long before it was listed is not trusted to stay as listed.
SETTLED_NS = 2_000_000_000
#: Listings kept at most (~300 bytes each with its path and names, packed: ~30 MB at most);
#: past it, all are forgotten and a tree that large is listed anew each time.
MAX_REMEMBERED = 100_000
_STAMP = struct.Struct("=QQqq")


@dataclass(frozen=True, slots=True)
class Listing:
    """A folder's sub-folders (not links to folders, which rg does not follow) and the names of
    its other entries that start with a dot (where ignore files are), hidden folders included
    in `folders`; `stamp` is what a change would change (packed), `settled` whether it may be
    reused. The names are kept NUL-joined (a name holds no NUL): one string a listing, not one
    a name."""

    stamp: bytes
    joined_folders: str
    joined_dotted: str
    settled: bool

    @property
    def folders(self) -> list[str]:
        return self.joined_folders.split("\0") if self.joined_folders else []

    @property
    def dotted(self) -> list[str]:
        return self.joined_dotted.split("\0") if self.joined_dotted else []


_remembered: dict[str, Listing] = {}
_lock = threading.Lock()


def list_folder(path: str) -> Listing | None:
    """The listing of folder `path`, reused while its stamp holds; None if it is not a folder
    (any more) or cannot be read (rg, walking it, says so itself)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None
    stamp = _STAMP.pack(st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
    known = _remembered.get(path)
    if known is not None and known.settled and known.stamp == stamp:
        return known
    folders, dotted = [], []
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.name)
                elif entry.name.startswith("."):
                    dotted.append(entry.name)
    except OSError:
        return None
    settled = max(st.st_mtime_ns, st.st_ctime_ns) < time.time_ns() - SETTLED_NS
    listing = Listing(stamp, "\0".join(folders), "\0".join(dotted), settled)
    with _lock:
        if len(_remembered) >= MAX_REMEMBERED:
            _remembered.clear()
        _remembered[path] = listing
    return listing
