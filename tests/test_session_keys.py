"""The cursor signing key: configured, or generated once into the cache dir (0600) and reused."""

from __future__ import annotations

import os
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sessions import CURSOR_KEY_FILE as KEY_FILE_NAME
from sessions import load_or_create_key


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_generated_on_first_start_with_0600_and_reused_after_restart(tmp_path: Path) -> None:
    cache = tmp_path / "cache" / "nested"
    key = load_or_create_key(cache)
    path = cache / KEY_FILE_NAME
    assert mode(path) == 0o600
    assert len(key) >= 32
    assert load_or_create_key(cache) == key  # a "restart" reads the same key
    assert load_or_create_key(tmp_path / "elsewhere") != key
    assert [p.name for p in cache.iterdir()] == [KEY_FILE_NAME]  # no temp files left behind


def test_configured_key_wins_and_writes_nothing(tmp_path: Path) -> None:
    assert load_or_create_key(tmp_path, configured="shared-replica-key-0123456789") == b"shared-replica-key-0123456789"
    assert not (tmp_path / KEY_FILE_NAME).exists()


def test_empty_configured_key_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="secret_key is empty"):
        load_or_create_key(tmp_path, configured="  ")


def test_short_configured_key_is_accepted_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert load_or_create_key(tmp_path, configured="short") == b"short"
    assert "easier to forge" in caplog.text


def test_a_readable_key_file_is_tightened(tmp_path: Path) -> None:
    key = load_or_create_key(tmp_path)
    path = tmp_path / KEY_FILE_NAME
    path.chmod(0o644)
    assert load_or_create_key(tmp_path) == key
    assert mode(path) == 0o600


def test_a_damaged_key_file_gets_an_actionable_error(tmp_path: Path) -> None:
    (tmp_path / KEY_FILE_NAME).write_text("\n")
    (tmp_path / KEY_FILE_NAME).chmod(0o600)
    with pytest.raises(ValueError, match="delete it"):
        load_or_create_key(tmp_path)


def test_concurrent_first_starts_agree_on_one_key(tmp_path: Path) -> None:
    with ThreadPoolExecutor(8) as pool:
        keys = set(pool.map(lambda _: load_or_create_key(tmp_path / "c"), range(16)))
    assert len(keys) == 1


def test_a_cursor_key_planted_as_a_link_is_neither_followed_nor_chmodded(tmp_path: Path) -> None:
    """Before: the key file was read through a link, and a target readable by others was
    chmodded (chmod follows links) to 0600: a `cursor.key -> /etc/passwd` planted in the cache
    dir made that file 0600 and its known content the key. Now the link is refused, saying
    what to do, and its target is untouched. (Found by an audit.)"""
    cache = tmp_path / "cache"
    cache.mkdir()
    public = tmp_path / "etc" / "passwd"  # stands for any world-readable file the user owns
    public.parent.mkdir()
    public.write_text("root:x:0:0:root:/root:/bin/bash\n")
    public.chmod(0o644)
    os.symlink(public, cache / "cursor.key")
    with pytest.raises(ValueError, match="not a link"):
        load_or_create_key(cache)
    assert stat.S_IMODE(public.stat().st_mode) == 0o644


def test_a_cursor_key_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    """A FIFO in place of the key file would have held the server's start for ever."""
    os.mkfifo(tmp_path / "cursor.key")
    with pytest.raises(ValueError, match="not a regular file"):
        load_or_create_key(tmp_path)
