"""Every file codepager reads back from its own dirs (index parts, the cursor key, offloaded
pages, saved datasets) is opened by `open_regular_file`: a link, a FIFO, a device, another
user's file or an oversized one in its place is refused at once, never read or waited on.
Saved datasets used to be opened without `O_NONBLOCK`: a FIFO planted as a data or metadata
file held the read (and its worker thread) until a writer came, i.e. for ever."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ulid import ULID

from infra import IsALinkError, NotRegularFileError, open_regular_file
from server.errors import DatasetNotFoundError
from server.output import OffloadStore
from server.proxy.dataset_store import DatasetStore


def _within(seconds: float, call: Callable[[], Any]) -> BaseException | Any:
    """`call`'s result or exception, failing the test when it has not returned in `seconds`
    (the thread is a daemon, so a call blocked on a FIFO does not hold the run)."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still blocked after {seconds} s"
    return outcome[0]


def test_a_regular_file_is_read_and_everything_else_refused(tmp_path: Path) -> None:
    (tmp_path / "ok").write_bytes(b"x" * 10)
    with open_regular_file(tmp_path / "ok", owned=True, max_bytes=10) as f:
        assert f.read() == b"x" * 10
    (tmp_path / "link").symlink_to(tmp_path / "ok")
    with pytest.raises(IsALinkError, match="is a link"):
        open_regular_file(tmp_path / "link")
    os.mkfifo(tmp_path / "fifo")
    refused = _within(5, lambda: open_regular_file(tmp_path / "fifo"))
    assert isinstance(refused, NotRegularFileError) and "not a regular file" in str(refused)
    with pytest.raises(NotRegularFileError, match="not a regular file"):
        open_regular_file(tmp_path)
    with pytest.raises(NotRegularFileError, match="not a regular file"):
        open_regular_file("/dev/zero")
    with pytest.raises(NotRegularFileError, match="holds 10 bytes, more than 9"):
        open_regular_file(tmp_path / "ok", max_bytes=9)
    with pytest.raises(FileNotFoundError):
        open_regular_file(tmp_path / "missing")


def test_another_users_file_is_refused_when_it_must_be_ours(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.write_bytes(b"data")
    if os.geteuid() != 0:
        with pytest.raises(NotRegularFileError, match="another user"):
            open_regular_file("/etc/hostname", owned=True)  # root's, readable by all
        return
    os.chown(theirs, 4242, 4242)  # as root, chown stands for the other user
    with pytest.raises(NotRegularFileError, match="another user"):
        open_regular_file(theirs, owned=True)
    with open_regular_file(theirs) as f:  # whoever owns it, when the caller does not ask
        assert f.read() == b"data"


def test_an_offloaded_page_swapped_for_a_fifo_or_link_is_refused_at_once(tmp_path: Path) -> None:
    store = OffloadStore(tmp_path / "out")
    records = [{"n": i} for i in range(3)]
    for plant in ("fifo", "link", "dir"):
        page = store.write(tool="t", query="q", records=records)
        page.path.unlink()
        if plant == "fifo":
            os.mkfifo(page.path)
        elif plant == "link":
            (tmp_path / "elsewhere").write_text("secret\n")
            page.path.symlink_to(tmp_path / "elsewhere")
        else:
            page.path.mkdir()
        reads = (
            functools.partial(store.read_whole, page.id),
            functools.partial(store.read_lines, page.id, 1, 2),
            functools.partial(store.open, page.id),
        )
        for read in reads:
            refused = _within(5, read)
            assert isinstance(refused, DatasetNotFoundError) and page.id in str(refused), (plant, refused)


def test_a_saved_datasets_files_swapped_for_fifos_are_refused_at_once(tmp_path: Path) -> None:
    store = DatasetStore(tmp_path / "data")
    data = store.save(str(ULID()), [{"n": 1}], {"tool": "t"})
    data.data_path.unlink()
    os.mkfifo(data.data_path)
    refused = _within(5, lambda: store.open(data.id).read(0, 1))
    assert isinstance(refused, DatasetNotFoundError) and data.id in str(refused)
    # a link there was answered with a raw OSError (ELOOP) before (found by a review)
    data.data_path.unlink()
    (tmp_path / "elsewhere.jsonl").write_text('{"secret": 1}\n')
    data.data_path.symlink_to(tmp_path / "elsewhere.jsonl")
    refused = _within(5, lambda: store.open(data.id).read(0, 1))
    assert isinstance(refused, DatasetNotFoundError) and "secret" not in str(refused), refused
    meta = store.save(str(ULID()), [{"n": 1}], {"tool": "t"})
    meta.metadata_path.unlink()
    os.mkfifo(meta.metadata_path)
    refused = _within(5, lambda: store.metadata(meta.id))
    assert isinstance(refused, DatasetNotFoundError) and meta.id in str(refused)
