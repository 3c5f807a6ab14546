"""`codepager serve` rooted at the user's home directory, with the index cache inside it,
says so loudly at start (a real `serve` process)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from harness.commands import codepager_cmd
from server.cli.home_root import home_root_warnings


def test_only_a_root_that_is_home_with_the_cache_inside_is_warned_of(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "project").mkdir(parents=True)
    inside, outside = home / ".cache" / "codepager", tmp_path / "cache"
    (warning,) = home_root_warnings([home, home / "project"], inside, home)
    assert warning.startswith(f"WARNING: root {home} is your home directory, and the index cache")
    assert "Serve a project folder instead" in warning and "index.cache_dir" in warning
    assert home_root_warnings([home / "project"], inside, home) == []
    assert home_root_warnings([home], outside, home) == []
    linked = tmp_path / "me"
    linked.symlink_to(home)
    assert len(home_root_warnings([linked], inside, home)) == 1  # the same folder, however named


@pytest.mark.slow
def test_serve_rooted_at_home_warns_at_start(tmp_path: Path) -> None:
    """The default cache dir is `~/.cache/codepager`, inside a home directory served whole: said
    on stderr before the server starts, whatever the log level."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEPAGER_", "XDG_"))}
    env.update({"HOME": str(home), "CODEPAGER_INDEX__INDEX_ON_START": "false", "CODEPAGER_SERVER__LOG_LEVEL": "ERROR"})
    cmd, args = codepager_cmd()
    done = subprocess.run(
        [cmd, *args, "serve", "--root", str(home)],
        env=env, cwd=home, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert f"codepager: WARNING: root {home} is your home directory" in done.stderr, done.stderr[-2000:]
    assert str(home / ".cache" / "codepager") in done.stderr
