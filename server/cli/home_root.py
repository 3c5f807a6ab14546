"""The warning `codepager serve` prints at start when a root is the user's home directory and
the index cache dir lies inside it (the default one does: `~/.cache/codepager`).

That is supported (the cache is left out of every walk), but it is rarely what was meant:
every file of the home directory is then searchable and indexed (keys, tokens, shell history,
every other repository), an agent's every search walks all of it, and anything written under
the cache's path by what lives in the home directory is read back as codepager's own. So it
is said loudly, on stderr, whatever the log level, with what to do instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def home_root_warnings(roots: Sequence[Path], cache_dir: Path, home: Path | None = None) -> list[str]:
    """One warning per root that is `home` (the user's home directory by default) while
    `cache_dir` lies inside it; none when the home directory cannot be told."""
    try:
        home = (home or Path.home()).resolve()
    except (OSError, RuntimeError):  # no HOME and no passwd entry
        return []
    cache = cache_dir.expanduser().resolve()
    if home not in (cache, *cache.parents):
        return []
    return [
        f"WARNING: root {root} is your home directory, and the index cache (index.cache_dir, {cache}) is "
        "inside it. Every file there is searched and indexed (keys, tokens, every other repository), and the "
        "cache is kept out of searches only by being skipped. Serve a project folder instead (--root "
        f"{home / 'project'}), or set index.cache_dir (CODEPAGER_INDEX__CACHE_DIR) outside the root."
        for root in roots
        if root.resolve() == home
    ]
