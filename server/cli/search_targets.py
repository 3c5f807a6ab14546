"""What `codepager search PATTERN [PATH...]` searches, and how it prints the paths: as rg does.

The CLI is the user's own tool in their own shell, so it searches whatever PATH they name;
`server.roots` restricts what a server hands to its clients and does not apply here. Each
PATH becomes a `SearchLocation` for the engine: inside the working directory it is a sub-path
of the working directory (so semantic searches share its one index), elsewhere the named
directory itself, or a named file's directory with the file as the sub-path.

Paths are printed the way rg prints them (checked against rg 14.1): with no PATH relative to
the working directory (`x.py`); under a named directory as the name was typed joined with the
rest (`./x.py` for `.`, `../other/z.py`, `/abs/dir/z.py`, `sub/y.py` for `sub/`); a named file
exactly as typed. Like rg, file names are left out of the text output when the one PATH named
is a file.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from search_engine import SearchLocation, display_path


class MissingPathError(Exception):
    """A PATH that cannot be searched; the message is rg's `PATH: reason`."""


@dataclass(frozen=True, slots=True)
class Target:
    """One PATH (or the working directory): where the engine searches and how matches print.

    `given` is the PATH as typed (None: none was given), in display form (`search_engine.files.discovery`:
    bytes that are not UTF-8 as escapes, like the match paths)."""

    location: SearchLocation
    given: str | None
    is_file: bool

    def shown(self, match_path: str) -> str:
        """`match_path` (relative to the location's root) as rg would print it."""
        if self.given is None:
            return match_path
        if self.is_file:
            return self.given
        sub = self.location.sub
        rest = match_path[len(display_path(os.fsencode(sub))) + 1 :] if sub else match_path
        return self.given + rest if self.given.endswith("/") else f"{self.given}/{rest}"


def resolve_target(given: str | None) -> Target:
    """The `Target` for one PATH argument (None: the working directory).

    Raises MissingPathError for a path that does not exist, cannot be looked at, or is
    neither a regular file nor a directory (a FIFO would block the search)."""
    cwd = Path(os.getcwd())
    if given is None:
        return Target(SearchLocation(cwd, None), None, is_file=False)
    shown = display_path(os.fsencode(given))
    try:
        mode = os.stat(given).st_mode
        resolved = Path(given).resolve(strict=True)
    except FileNotFoundError:
        raise MissingPathError(f"{shown}: No such file or directory") from None
    except (OSError, RuntimeError) as exc:
        raise MissingPathError(f"{shown}: {getattr(exc, 'strerror', None) or 'cannot be resolved'}") from None
    is_file = stat.S_ISREG(mode)
    if not (is_file or stat.S_ISDIR(mode)):
        raise MissingPathError(
            f"{shown}: not a regular file or directory (FIFOs, sockets and devices are not searched)"
        )
    if resolved == cwd or cwd in resolved.parents:
        rel = resolved.relative_to(cwd).as_posix()
        location = SearchLocation(cwd, None if rel == "." else rel)
    elif is_file:
        location = SearchLocation(resolved.parent, resolved.name)
    else:
        location = SearchLocation(resolved, None)
    return Target(location, shown, is_file)
