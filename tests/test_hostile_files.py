"""Hostile files: binary, invalid UTF-8, a 50 MB single-line minified file (cut to the line
width, memory proportional to the line, not more), and files rewritten or deleted while searches
run. The server answers every call and never returns another file's bytes."""

from __future__ import annotations

import json
import os
import random
import threading
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from server.app import build_app
from tests.hostile_helpers import SyncClient
from tests.server_helpers import codepager_cmd, make_settings, serve_env, page_matches, structured

WIDTH = 200
BIG = 50 * 1024 * 1024


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("files") / "repo"
    root.mkdir()
    (root / "blob.bin").write_bytes(b"needle in a binary\n\x00\x01\x02needle again\n")
    (root / "latin1.txt").write_bytes(b"needle caf\xe9 \xff\xfe end\n")
    (root / "ok.txt").write_text("needle plain\n")
    return root


@pytest.fixture(scope="module")
def client(tree, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("files-settings")
    sync = SyncClient(build_app(make_settings(tree, tmp, search={"max_line_width": WIDTH})))
    yield sync
    sync.close()


def matches(client: SyncClient, args: dict) -> list[dict]:
    return page_matches(structured(client.call("regex_search", {"page_size": 200, **args})))


def test_binary_files_contribute_nothing(client):
    assert {m["path"] for m in matches(client, {"pattern": "needle"})} == {"latin1.txt", "ok.txt"}


def test_invalid_utf8_is_shown_with_replacement_characters(client):
    (m,) = matches(client, {"pattern": "needle caf"})
    assert m["text"] == "needle caf\ufffd \ufffd\ufffd end"
    json.dumps(m, ensure_ascii=False).encode("utf-8")  # valid text on the wire


def _write_minified(path: Path, needle_at: int) -> None:
    unit = b"var a=function(b){return b+1};"
    with path.open("wb") as f:
        f.write(unit * (needle_at // len(unit)))
        f.write(b"NEEDLE_HERE();")
        f.write(unit * ((BIG - needle_at) // len(unit)))


def _vm_hwm_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def _server_pid(root: Path) -> int:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"serve" in cmdline and os.fsencode(root) in cmdline:
                return int(entry.name)
    raise AssertionError("server process not found")


async def test_a_50_mb_single_line_file_is_cut_to_width_with_bounded_memory(tmp_path):
    """One real stdio server with max_file_size raised so the file is searched at all (by
    default files over 1 MB are skipped). The match comes back cut to the line width, and the
    server's peak RSS grows by a small multiple of the one line it had to hold, not more."""
    root = tmp_path / "minified"
    root.mkdir()
    _write_minified(root / "app.min.js", needle_at=BIG // 2)
    (root / "small.js").write_text("NEEDLE_HERE();\n")
    env = serve_env(tmp_path)
    env.update({"CODEPAGER_SEARCH__MAX_FILE_SIZE": str(64 * 1024 * 1024), "CODEPAGER_SEARCH__MAX_LINE_WIDTH": str(WIDTH)})
    cmd, args = codepager_cmd()
    transport = StdioTransport(cmd, [*args, "serve", "--root", str(root)], env=env, cwd=str(root))
    async with Client(transport) as c:
        warm = structured(await c.call_tool("regex_search", {"pattern": "NEEDLE_HERE", "path": "small.js"}))
        assert warm["results"]["count"] == 1
        pid = _server_pid(root)
        before_kb = _vm_hwm_kb(pid)
        args = {"pattern": "NEEDLE_HERE", "path": "app.min.js", "detail": "full"}
        body = structured(await c.call_tool("regex_search", args))
        growth_mb = (_vm_hwm_kb(pid) - before_kb) / 1024
    (m,) = page_matches(body)
    content = m["match"]["content"]
    assert "NEEDLE_HERE" in content and len(content) <= WIDTH + 2
    assert content.startswith("…") and content.endswith("…")
    unit = len(b"var a=function(b){return b+1};")
    assert m["match"]["span"]["byte_start"] == (BIG // 2) // unit * unit
    assert growth_mb < 8 * BIG / 2**20, f"peak RSS grew by {growth_mb:.0f} MB for a 50 MB line"


def test_files_rewritten_and_deleted_during_searches(tmp_path):
    """A writer thread truncates, rewrites, deletes and recreates files while 30 searches run:
    every call answers (results or a clear tool error), and once the churn stops the count is
    exact again."""
    root = tmp_path / "churn"
    root.mkdir()
    files = [root / f"f{i}.txt" for i in range(40)]
    for f in files:
        f.write_text("needle\n" * 50)
    stop = threading.Event()

    def churn() -> None:
        rnd = random.Random(7)
        while not stop.is_set():
            f = rnd.choice(files)
            action = rnd.random()
            try:
                if action < 0.3:
                    f.unlink(missing_ok=True)
                elif action < 0.6:
                    f.write_text("")
                else:
                    f.write_text("needle\n" * rnd.randint(1, 200) + "\x00" * rnd.randint(0, 1))
            except OSError:
                pass

    sync = SyncClient(build_app(make_settings(root, tmp_path)))
    writer = threading.Thread(target=churn, daemon=True)
    writer.start()
    try:
        for i in range(30):
            result = sync.call("regex_search", {"pattern": "needle", "page_size": 20 + i}, raise_on_error=False)
            if result.is_error:
                assert result.structured_content["error"]["code"] in ("search_failed", "timeout"), result
                continue
            body = structured(result)
            while (cursor := body["pagination"]["next_cursor"]) is not None:  # pages come from the snapshot
                body = structured(sync.call("regex_search", {"cursor": cursor}))
        stop.set()
        writer.join()
        for f in files:
            f.write_text("needle\n" * 3)
        final = structured(sync.call("regex_search", {"pattern": "needle", "page_size": 10}))
        assert final["results"]["total_count"] == 120
    finally:
        stop.set()
        sync.close()
