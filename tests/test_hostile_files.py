"""Hostile files: binary, invalid UTF-8, a 50 MB single-line minified file (cut to the line
width, memory proportional to the line, not more), and files rewritten or deleted while searches
run. The server answers every call and never returns another file's bytes."""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from harness.commands import codepager_cmd
from search_engine import DEFAULT_MAX_LINE_WIDTH
from server.app import build_app
from tests.hostile_helpers import SyncClient
from tests.server_helpers import (
    make_settings,
    page_matches,
    peak_rss,
    pid_with_args,
    serve_env,
    stdio_client,
    structured,
)

#: Lines are cut to this around the match (the engine's constant, not a setting).
WIDTH = DEFAULT_MAX_LINE_WIDTH
BIG = 50 * 1024 * 1024


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("files") / "repo"
    root.mkdir()
    (root / "blob.bin").write_bytes(b"needle in a binary\n\x00\x01\x02needle again\n")
    (root / "latin1.txt").write_bytes(b"needle caf\xe9 \xff\xfe end\n")
    (root / "ok.txt").write_text("needle plain\n")
    return root


@pytest.fixture(scope="module")
def client(tree, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("files-settings")
    sync = SyncClient(build_app(make_settings(tree, tmp)))
    yield sync
    sync.close()


def matches(client: SyncClient, args: dict[str, Any]) -> list[dict[str, Any]]:
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


@pytest.mark.slow
async def test_a_50_mb_single_line_file_is_cut_to_width_with_bounded_memory(tmp_path):
    """One real stdio server with max_file_size raised so the file is searched at all (by
    default files over 1 MB are skipped). The match comes back cut to the line width, and the
    server's peak RSS grows by a small multiple of the one line it had to hold, not more."""
    root = tmp_path / "minified"
    root.mkdir()
    _write_minified(root / "app.min.js", needle_at=BIG // 2)
    (root / "small.js").write_text("NEEDLE_HERE();\n")
    env = serve_env(tmp_path)
    env.update({"CODEPAGER_SEARCH__MAX_FILE_SIZE": str(64 * 1024 * 1024)})
    cmd, args = codepager_cmd()
    transport = StdioTransport(cmd, [*args, "serve", "--root", str(root)], env=env, cwd=str(root))
    async with Client(transport) as c:
        warm = structured(await c.call_tool("regex_search", {"pattern": "NEEDLE_HERE", "path": "small.js"}))
        assert warm["results"]["count"] == 1
        pid = pid_with_args("serve", str(root))
        before = peak_rss(pid)
        body = structured(
            await c.call_tool("regex_search", {"pattern": "NEEDLE_HERE", "path": "app.min.js", "detail": "full"})
        )
        growth_mb = (peak_rss(pid) - before) / 2**20
    (m,) = page_matches(body)
    content = m["match"]["content"]
    assert "NEEDLE_HERE" in content and len(content) <= WIDTH + 2
    assert content.startswith("…") and content.endswith("…")
    unit = len(b"var a=function(b){return b+1};")
    assert m["match"]["span"]["byte_start"] == (BIG // 2) // unit * unit
    assert growth_mb < 8 * BIG / 2**20, f"peak RSS grew by {growth_mb:.0f} MB for a 50 MB line"


@pytest.mark.slow
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


@pytest.mark.slow
async def test_a_file_named_in_path_is_held_to_max_file_size(tmp_path):
    """ripgrep ignores --max-filesize for a path on its command line, so naming a file used to
    search it whatever its size (a 300 MB one-line file cost 2.2 GB). On a real stdio server
    with search.max_file_size = 100,000 bytes: a file of exactly that size is searched; one
    byte more, or a 40 MB one-line file, is skipped with a warning saying how to raise the
    limit, and the server's peak RSS does not grow with the file."""
    limit = 100_000
    root = tmp_path / "sized"
    root.mkdir()
    line = b"NEEDLE_HERE();"
    (root / "at_limit.js").write_bytes(line + b"x" * (limit - len(line) - 1) + b"\n")
    (root / "just_over.js").write_bytes(line + b"x" * (limit - len(line)) + b"\n")
    with (root / "huge.min.js").open("wb") as f:
        f.write(line)
        for _ in range(40):
            f.write(b"var a=function(b){return b+1};" * 34_000)
    async with stdio_client(root, tmp_path, serve_env(tmp_path, search__max_file_size=str(limit))) as c:
        at_limit = structured(await c.call_tool("regex_search", {"pattern": "NEEDLE_HERE", "path": "at_limit.js"}))
        assert at_limit["results"]["count"] == 1
        pid = pid_with_args("serve", str(root))
        before = peak_rss(pid)
        over = {}
        for name in ("just_over.js", "huge.min.js"):
            over[name] = structured(await c.call_tool("regex_search", {"pattern": "NEEDLE_HERE", "path": name}))
        growth_mb = (peak_rss(pid) - before) / 2**20
    for name, body in over.items():
        assert body["results"]["total_count"] == 0, name
        warnings = body["metadata"]["warnings"]
        assert any(
            name in w and "over search.max_file_size (100,000 bytes)" in w and "CODEPAGER_SEARCH__MAX_FILE_SIZE" in w
            for w in warnings
        ), warnings
    assert growth_mb < 10, f"peak RSS grew by {growth_mb:.0f} MB for files the limit excludes"
