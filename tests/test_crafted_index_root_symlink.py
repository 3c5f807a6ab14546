"""Links planted where the indexer writes outside a generation: `ROOT` in the index dir, and the
temporary files `CURRENT` is replaced from. Whoever can put a link there (a repository that
commits its cache dir, when `index.cache_dir` is inside its root, or any local user when the
cache dir is shared or writable by others) chooses a file for the indexer to overwrite,
anywhere the server's user may write (as root: anywhere). Found by an audit."""

from __future__ import annotations

import os
from pathlib import Path

from search_engine.config import EngineConfig
from search_engine.index.manager import IndexManager
from search_engine.index.store import index_dir
from tests.index_helpers import CountingEmbedder, write_repo


def test_a_root_file_planted_as_a_link_never_redirects_the_write(tmp_path: Path, counting: CountingEmbedder) -> None:
    """A repository whose committed cache dir is the configured one commits `ROOT` as a link to
    the user's `~/.bashrc`. Before: publishing a generation wrote `ROOT` with
    `Path.write_text`, which follows links, so indexing truncated `~/.bashrc` and wrote the
    root's path into it. Now `ROOT` is written to a new file of a random name, then renamed
    over the link: the link's target is untouched."""
    repo = write_repo(tmp_path / "repo")
    victim = tmp_path / "home" / ".bashrc"
    victim.parent.mkdir()
    victim.write_text("export PATH=$HOME/bin:$PATH\n")
    # A repository that commits its cache dir (cache_dir = <root>/.cache/codepager) commits
    # this relative link; git stores links as links.
    cache = repo / ".cache" / "codepager"
    store = index_dir(cache, repo)
    store.mkdir(parents=True)
    os.symlink(os.path.relpath(victim, store), store / "ROOT")

    IndexManager(EngineConfig(cache_dir=cache), embedder=counting).update(repo)

    assert victim.read_text() == "export PATH=$HOME/bin:$PATH\n", (
        f"a file outside the cache was overwritten through ROOT: now {victim.read_text()!r}"
    )


def test_a_temporary_current_planted_as_a_link_never_redirects_the_write(
    tmp_path: Path, counting: CountingEmbedder
) -> None:
    """A link to the user's `~/.profile` planted at `.tmp-CURRENT.<pid>`, the temporary file
    `CURRENT` is replaced from: PIDs in a container are small and predictable, and a repository
    can commit a link for each likely one. Before: `_point_current_at` wrote that name with
    `write_text` too, through the link, overwriting `~/.profile`, then renamed the link itself
    over `CURRENT` (`refresh_files` did the same with `.tmp-files.msgpack.<pid>` in the live
    generation). Now the temporary file has a random name and is created new: the link's
    target is untouched."""
    repo = write_repo(tmp_path / "repo")
    victim = tmp_path / "home" / ".profile"
    victim.parent.mkdir()
    victim.write_text("umask 077\n")
    cache = tmp_path / "cache"
    store = index_dir(cache, repo)
    store.mkdir(parents=True)
    os.symlink(victim, store / f".tmp-CURRENT.{os.getpid()}")

    IndexManager(EngineConfig(cache_dir=cache), embedder=counting).update(repo)

    assert victim.read_text() == "umask 077\n", f"overwritten through .tmp-CURRENT: now {victim.read_text()!r}"
