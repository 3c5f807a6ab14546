"""OffloadStore: the file format, permissions, atomic concurrent writes, resource reads with id
validation, and expiry that only ever touches codepager's own files."""

from __future__ import annotations

import json
import os
import re
import stat
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from server.errors import DatasetNotFoundError, InvalidDatasetIdError, StoreWriteError
from server.output import OffloadStore, estimate_tokens
from server.output.files import CleanupReport
from server.output.jsontext import dumps_bytes
from tests.output_helpers import make_records

NAME = re.compile(r"^codepager-(?P<tool>[A-Za-z0-9_.-]+)-(?P<id>[0-9A-HJKMNP-TV-Z]{26})\.jsonl$")


def _age(path: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t), follow_symlinks=False)


def test_file_format_header_then_one_record_per_line(tmp_path: Path) -> None:
    store = OffloadStore(tmp_path / "out")
    records = make_records(25, scored=True, context=True, text="ünïcode")
    f = store.write(tool="semantic_search", query="needle", records=records, page=3, next_cursor="abc")
    name = NAME.match(f.path.name)
    assert name is not None and name["id"] == f.id and f.path.parent == tmp_path / "out"
    raw = f.path.read_bytes()
    assert f.size_bytes == len(raw) and raw.endswith(b"\n")
    lines = raw.decode("utf-8").splitlines()
    assert len(lines) == f.line_count == 26
    header = json.loads(lines[0])
    assert header == {
        "type": "codepager_header",
        "tool": "semantic_search",
        "query": "needle",
        "count": 25,
        "schema_version": 1,
        "timestamp": header["timestamp"],
        "estimated_tokens": estimate_tokens("".join(line + "\n" for line in lines[1:])),
        "page": 3,
        "next_cursor": "abc",
        "record_keys": ["file", "match", "type", "context"],
    }
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", header["timestamp"])
    assert [json.loads(line) for line in lines[1:]] == records
    assert "ünïcode" in lines[1]  # not \u-escaped


def test_streamed_lines_make_the_same_file_as_records(tmp_path: Path) -> None:
    """`write_lines` (records too many to hold, spooled) writes what `write` would, 0600, with
    no spool left behind, however the lines fall across its copy chunks."""
    store = OffloadStore(tmp_path / "out")
    records = [{"i": i, "text": "ünïcode " * (i % 7) + "x" * 300_000 * (i % 5 == 0)} for i in range(40)]
    whole = store.write(tool="analyze-with-duckdb", query="q", records=records)
    lines = (dumps_bytes(r) for r in records)
    streamed = store.write_lines(tool="analyze-with-duckdb", query="q", lines=lines, record_keys=["i", "text"])
    assert streamed.path.read_bytes().split(b"\n", 1)[1] == whole.path.read_bytes().split(b"\n", 1)[1]
    assert (streamed.header["count"], streamed.header["record_keys"]) == (
        whole.header["count"],
        whole.header["record_keys"],
    )
    # estimated a chunk at a time: each chunk rounds its ASCII quarter-tokens up once
    assert 0 <= streamed.header["estimated_tokens"] - whole.header["estimated_tokens"] < 3
    assert (streamed.line_count, streamed.size_bytes) == (41, streamed.path.stat().st_size)
    assert stat.S_IMODE(streamed.path.stat().st_mode) == 0o600
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted([whole.path.name, streamed.path.name])


def test_permissions_dir_0700_files_0600_and_no_temp_left(tmp_path: Path) -> None:
    store = OffloadStore(tmp_path / "a" / "out")
    f = store.write(tool="t", query="q", records=make_records(3))
    assert stat.S_IMODE((tmp_path / "a" / "out").stat().st_mode) == 0o700
    assert stat.S_IMODE(f.path.stat().st_mode) == 0o600
    assert [p.name for p in f.path.parent.iterdir()] == [f.path.name]


def test_tool_names_are_made_safe_for_file_names(tmp_path: Path) -> None:
    f = OffloadStore(tmp_path).write(tool="../evil tool/äx", query="q", records=[])
    name = NAME.match(f.path.name)
    assert f.path.parent == tmp_path and name is not None and name["tool"] == ".._evil_tool_x"
    assert f.header["tool"] == "../evil tool/äx" and f.line_count == 1


def test_symlinked_output_dir_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(StoreWriteError, match="symlink"):
        OffloadStore(tmp_path / "link").write(tool="t", query="q", records=make_records(1))
    assert list((tmp_path / "real").iterdir()) == []


def test_concurrent_writes_get_unique_names_and_whole_files(tmp_path: Path) -> None:
    store = OffloadStore(tmp_path / "out")
    records = make_records(200, content_chars=300)

    def write(i: int) -> tuple[str, Path]:
        f = store.write(tool="t", query=f"q{i}", records=records[: 50 + i])
        return f.id, f.path

    with ThreadPoolExecutor(8) as pool:
        written = list(pool.map(write, range(64)))
    assert len({i for i, _ in written}) == 64
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(p.name for _, p in written)
    for i, (_, path) in enumerate(written):
        lines = path.read_text().splitlines()
        assert json.loads(lines[0])["query"] == f"q{i}" and len(lines) == 51 + i
        assert [json.loads(line) for line in lines[1:]] == records[: 50 + i]


# -- reading -----------------------------------------------------------------------------------


def test_read_whole_and_line_ranges(tmp_path: Path) -> None:
    store = OffloadStore(tmp_path)
    f = store.write(tool="t", query="q", records=make_records(10))
    text = f.path.read_text()
    lines = text.splitlines(keepends=True)
    assert store.read_whole(f.id) == text
    assert store.read_lines(f.id, 1, 1) == lines[0]
    assert store.read_lines(f.id, 2, 4) == "".join(lines[1:4])
    assert store.read_lines(f.id, 9, 500) == "".join(lines[8:])  # clamped at EOF
    assert store.read_header(f.id)["count"] == 10
    with pytest.raises(ValueError, match="1-based"):
        store.read_lines(f.id, 0, 3)
    with pytest.raises(ValueError, match="1-based"):
        store.read_lines(f.id, 5, 4)
    with pytest.raises(ValueError, match="past the end"):
        store.read_lines(f.id, 12, 20)


@pytest.mark.parametrize(
    "bad",
    [
        "../../etc/passwd",
        "01ARZ3NDEKTSV4RRFFQ69G5FA",
        "01ARZ3NDEKTSV4RRFFQ69G5FAVX",
        "01arz3ndektsv4rrffq69g5fav",
        "01ARZ3NDEKTSV4RRFFQ69G5FA/",
        "*",
        "",
        "01ARZ3NDEKTSV4RRFFQ69G5FIL",
    ],
)
def test_ids_must_be_ulids(tmp_path: Path, bad: str) -> None:
    store = OffloadStore(tmp_path)
    with pytest.raises(InvalidDatasetIdError, match="26-character"):
        store.read_whole(bad)


def test_unknown_id_and_foreign_lookalike_are_not_found(tmp_path: Path) -> None:
    store = OffloadStore(tmp_path)
    with pytest.raises(DatasetNotFoundError, match="run the search again"):
        store.read_whole("01ARZ3NDEKTSV4RRFFQ69G5FAV")
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    (tmp_path / "codepager-t-01ARZ3NDEKTSV4RRFFQ69G5FAV.jsonl").symlink_to(outside)
    with pytest.raises(DatasetNotFoundError):
        store.read_whole("01ARZ3NDEKTSV4RRFFQ69G5FAV")


# -- expiry ------------------------------------------------------------------------------------


def test_cleanup_removes_only_our_expired_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    store = OffloadStore(out, retention_hours=1)
    old = store.write(tool="t", query="old", records=make_records(5))
    new = store.write(tool="t", query="new", records=make_records(5))
    _age(old.path, 7200)
    victims_outside = tmp_path / "outside.jsonl"
    victims_outside.write_text("keep me")
    _age(victims_outside, 7200)
    foreign = {
        "notes.txt": "file",
        "codepager-t-01ARZ3NDEKTSV4RRFFQ69G5FAV.jsonl.bak": "file",
        "codepager-t-01ARZ3NDEKTSV4RRFFQ69G5FAW.jsonl": "dir",
        "codepager-t-01ARZ3NDEKTSV4RRFFQ69G5FAX.jsonl": "symlink",
        "codepager-t-01ARZ3NDEKTSV4RRFFQ69G5FAY.jsonl": "other-owner",
    }
    for name, kind in foreign.items():
        p = out / name
        if kind == "dir":
            p.mkdir()
        elif kind == "symlink":
            p.symlink_to(victims_outside)
        else:
            p.write_text("x")
            if kind == "other-owner":
                os.chown(p, 4242, 4242)
        _age(p, 7200)
    stale_temp = out / ".codepager-t-01ARZ3NDEKTSV4RRFFQ69G5FAZ.jsonl.tmp"
    stale_temp.write_text("half")
    _age(stale_temp, 7200)
    young_temp = out / ".codepager-t-01ARZ3NDEKTSV4RRFFQ69G5FB0.jsonl.tmp"
    young_temp.write_text("writing")

    size_old = old.path.stat().st_size
    report = store.cleanup()
    assert sorted(report.files) == sorted([str(old.path), str(stale_temp)])
    assert report.removed_count == 2 and report.freed_bytes == size_old + len("half")
    assert new.path.exists() and young_temp.exists() and victims_outside.read_text() == "keep me"
    assert all((out / name).exists() or (out / name).is_symlink() for name in foreign)

    everything = store.cleanup(max_age_days=0)
    assert everything.files == [str(new.path)]
    assert young_temp.exists() and all((out / n).exists() or (out / n).is_symlink() for n in foreign)
    assert store.cleanup() == CleanupReport(removed_count=0, freed_bytes=0, files=[])
    with pytest.raises(ValueError, match=">= 0"):
        store.cleanup(max_age_days=-1)


def test_cleanup_of_a_missing_dir_is_empty(tmp_path: Path) -> None:
    assert OffloadStore(tmp_path / "never").cleanup().removed_count == 0


def test_writes_sweep_expired_files_opportunistically(tmp_path: Path) -> None:
    store = OffloadStore(tmp_path, retention_hours=1, sweep_interval_s=3600)
    first = store.write(tool="t", query="q", records=[])  # sweeps (first write), nothing to remove
    _age(first.path, 7200)
    store.write(tool="t", query="q", records=[])  # interval not elapsed: no sweep
    assert first.path.exists()
    store.sweeper.interval_s = 0
    store.write(tool="t", query="q", records=[])
    assert not first.path.exists()


def test_background_sweeper_expires_files_and_stops(tmp_path: Path) -> None:
    store = OffloadStore(tmp_path, retention_hours=1, sweep_interval_s=0.05)
    f = store.write(tool="t", query="q", records=[])
    _age(f.path, 7200)
    store.sweeper.start()
    try:
        deadline = time.monotonic() + 10
        while f.path.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not f.path.exists()
    finally:
        store.sweeper.close()
    assert not any(t.name == "codepager-offload-sweep" for t in threading.enumerate())


def test_a_header_stays_readable_whatever_the_query_and_the_record_keys(tmp_path: Path) -> None:
    """The header is read back only up to 1 MiB. Before: the caller's whole query and every
    record key went into it, so a 1.1 MB SQL comment (found by an audit) or records with 60,000
    long keys made a file `read_header` called "not a codepager result file": the agent got a
    file_ref it could not query, list or page. Now the query is kept to its first 4,096
    characters, marked, and keys past 512 KiB of JSON are not listed (SQL then reads each line
    as one JSON column, as the descriptor says)."""
    store = OffloadStore(tmp_path / "offload")
    wide = {f"a_rather_long_field_name_{i:06d}": i for i in range(60_000)}
    f = store.write(tool="analyze-with-duckdb", query="SELECT 1 -- " + "x" * 1_100_000, records=[wide])
    header = store.read_header(f.id)
    assert header["query"].startswith("SELECT 1 -- xxx") and "[cut " in header["query"]
    assert len(header["query"]) < 4_200 and header["record_keys"] == []
    narrow = store.write(tool="analyze-with-duckdb", query="SELECT 1", records=[{"a": 1}])
    assert store.read_header(narrow.id)["record_keys"] == ["a"] and store.read_header(narrow.id)["query"] == "SELECT 1"


def test_a_cursor_too_long_for_the_header_is_cut_there_and_the_header_still_reads(tmp_path: Path) -> None:
    """A cursor carries the search's filters, which an agent can make a megabyte long (found by
    a review: nine 110 KB exclude globs made the header line 1.08 MB, over what `read_header`
    reads, so the file_ref's dataset was "not a codepager result file"). The header now says
    where the cursor is instead: the answer's pagination, which the caller sends anyway."""
    store = OffloadStore(tmp_path / "offload")
    f = store.write(tool="regex_search", query="q", records=make_records(3), page=1, next_cursor="c" * 1_100_000)
    header = store.read_header(f.id)
    assert header["count"] == 3 and "pagination.next_cursor" in header["next_cursor"]
    short = store.write(tool="regex_search", query="q", records=make_records(3), page=1, next_cursor="abc")
    assert store.read_header(short.id)["next_cursor"] == "abc"
