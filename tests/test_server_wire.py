"""The server as clients really run it: `codepager serve` as a stdio subprocess, and over
streamable HTTP on a loopback port. Same fastmcp Client, real processes, real pipes/sockets."""

from __future__ import annotations

import asyncio
import json
import os
import re
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client

from harness.commands import codepager_cmd
from harness.http_server import HttpServer
from tests.hostile_helpers import refusal
from tests.server_helpers import cli_full_list, page_matches, serve_env, stdio_client, structured, walk

pytestmark = pytest.mark.slow  # every test here starts processes or builds a large index


async def test_stdio_paging_to_the_end_equals_the_cli(code_tree, tmp_path):
    async with stdio_client(code_tree, tmp_path) as client:
        matches, responses = await walk(client, "regex_search", {"pattern": "needle", "page_size": 50})
    assert len(responses) == 5
    assert [(m["path"], m["line"]) for m in matches] == cli_full_list(code_tree, "needle")


# Four searches with different lists (12 to 240 matches) and page sizes (1 to 24 pages).
CONCURRENT_SEARCHES = [("needle", 10), ("return", 25), (r"needle_\d+_1\d", 7), (r"module \d+", 1)]


def locations(matches: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(m["path"], m["line"]) for m in matches]


async def walk_all_at_once(client: Client[Any], rotate: int = 0) -> list[list[tuple[str, int]]]:
    """Every search in CONCURRENT_SEARCHES walked to its end at the same time on `client`
    (their page calls interleave), returned in CONCURRENT_SEARCHES order."""
    order = CONCURRENT_SEARCHES[rotate:] + CONCURRENT_SEARCHES[:rotate]
    walks = await asyncio.gather(*(walk(client, "regex_search", {"pattern": p, "page_size": n}) for p, n in order))
    by_pattern = {p: locations(matches) for (p, _), (matches, _) in zip(order, walks, strict=True)}
    return [by_pattern[p] for p, _ in CONCURRENT_SEARCHES]


async def test_stdio_concurrent_walks_on_one_session_each_equal_the_cli(code_tree, tmp_path):
    expected = [cli_full_list(code_tree, p) for p, _ in CONCURRENT_SEARCHES]
    assert [len(e) for e in expected] == [240, 240, 120, 12]
    async with stdio_client(code_tree, tmp_path) as client:
        assert await walk_all_at_once(client) == expected


async def test_stdio_tampered_cursor_is_refused_on_the_wire(code_tree, tmp_path):
    async with stdio_client(code_tree, tmp_path) as client:
        first = structured(await client.call_tool("regex_search", {"pattern": "needle", "page_size": 10}))
        cursor = first["pagination"]["next_cursor"]
        # One character changed, to one it is not already (base64url: 1 in 64 cursors had an `x`
        # there, and the "tampered" cursor was the real one).
        tampered = cursor[:20] + ("y" if cursor[20] == "x" else "x") + cursor[21:]
        assert tampered != cursor
        assert (await refusal(client, "regex_search", {"cursor": tampered}))["code"] == "invalid_cursor"
        # The server keeps serving after the refusal.
        again = structured(await client.call_tool("regex_search", {"cursor": cursor}))
        assert again["pagination"]["current_page"] == 2


async def test_stdio_restart_between_pages_restores(code_tree, tmp_path):
    async with stdio_client(code_tree, tmp_path) as client:
        first = structured(await client.call_tool("regex_search", {"pattern": "needle", "page_size": 100}))
    async with stdio_client(code_tree, tmp_path) as client:  # a new server process
        rest, responses = await walk(client, "regex_search", {"cursor": first["pagination"]["next_cursor"]})
    assert responses[0]["metadata"]["cache"] == "restored"
    all_matches = page_matches(first) + rest
    assert [(m["path"], m["line"]) for m in all_matches] == cli_full_list(code_tree, "needle")


@pytest.fixture
def http_server(code_tree, tmp_path):
    server = HttpServer(code_tree, serve_env(tmp_path)).start()
    yield server
    server.stop()


async def test_streamable_http_paging(http_server, code_tree):
    async with http_server.client() as client:
        matches, responses = await walk(client, "regex_search", {"pattern": "needle", "page_size": 60})
    assert len(responses) == 4
    assert [(m["path"], m["line"]) for m in matches] == cli_full_list(code_tree, "needle")


async def test_streamable_http_concurrent_clients_each_walk_to_the_cli_list(http_server, code_tree):
    """Four clients, each on its own connection to one server, walk all the searches at once
    (identical searches share a session while different ones page side by side)."""
    expected = [cli_full_list(code_tree, p) for p, _ in CONCURRENT_SEARCHES]

    async def one_client(n: int) -> list[list[tuple[str, int]]]:
        async with http_server.client(timeout=120) as client:
            return await walk_all_at_once(client, rotate=n % len(CONCURRENT_SEARCHES))

    for walked in await asyncio.gather(*(one_client(n) for n in range(4))):
        assert walked == expected


@pytest.mark.parametrize("level", [None, "info"], ids=["default", "info"])
async def test_http_logs_at_the_configured_level(code_tree, tmp_path, level):
    """uvicorn and fastmcp used to log INFO lines over HTTP whatever the level: at the default
    (WARNING) a few requests print no INFO line; at `--log-level info`, uvicorn's access lines
    and fastmcp's start-up line are there, on stderr."""
    server = HttpServer(code_tree, serve_env(tmp_path), extra_args=["--log-level", level] if level else []).start()
    try:
        async with server.client() as client:
            await client.list_tools()
            structured(await client.call_tool("regex_search", {"pattern": "needle", "page_size": 5}))
    finally:
        log = server.stop()
    info_lines = [line for line in log.splitlines() if re.search(r"\bINFO\b", line)]
    if level is None:
        assert info_lines == [], log
    else:
        assert any("uvicorn.access" in line and '"POST /mcp HTTP/1.1" 200' in line for line in info_lines), log
        assert any("Starting MCP server" in line for line in info_lines), log


def test_stdout_carries_only_protocol(code_tree, tmp_path):
    """Anything but JSON-RPC on stdout would corrupt a stdio session: send garbage, then a valid
    initialize, and check every stdout line parses as JSON-RPC."""
    cmd, args = codepager_cmd()
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    proc = subprocess.run(
        [cmd, *args, "serve", "--root", str(code_tree)],
        input="this is not json\n" + json.dumps(init) + "\n",
        env=serve_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert lines, proc.stderr
    for line in lines:
        assert json.loads(line)["jsonrpc"] == "2.0"
    assert any(json.loads(ln).get("id") == 1 and "result" in json.loads(ln) for ln in lines)


def refused_for(error: dict[str, Any], reason: str) -> str:
    """Assert a refusal (`tests.hostile_helpers.refusal`) is for `reason` and tells the agent
    to search again; return its message."""
    assert error["reason"] == reason and error["code"] == "results_changed", error
    message: str = error["message"]
    assert "search without a cursor" in message or "search again without a cursor" in message, message
    return message


def edit_a_matching_line(root: Path) -> None:
    """Same number of matches, different content: only the result digest can tell."""
    path = root / "lib" / "mod00.py"
    path.write_text(path.read_text().replace("# needle 3\n", "# needle three\n"))


@pytest.mark.parametrize("lost", ["evicted", "restarted"])
async def test_a_cursor_over_edited_files_is_refused_once_it_must_be_restored(code_tree, tmp_path, lost):
    """The cursor's session is gone (evicted by another search in a one-session store, or the
    server restarted), a matching file was edited: the restored list differs, so the cursor is
    refused instead of silently skipping or repeating results."""
    env, one_session = serve_env(tmp_path), {"server.app.MAX_SESSIONS": 1}
    async with stdio_client(code_tree, tmp_path, env, constants=one_session) as client:
        first = structured(await client.call_tool("regex_search", {"pattern": "needle", "page_size": 50}))
        cursor = first["pagination"]["next_cursor"]
        edit_a_matching_line(code_tree)
        if lost == "evicted":
            structured(await client.call_tool("regex_search", {"pattern": "return"}))
            error = await refusal(client, "regex_search", {"cursor": cursor})
    if lost == "restarted":
        async with stdio_client(code_tree, tmp_path, env) as client:
            error = await refusal(client, "regex_search", {"cursor": cursor})
    assert "matching files were edited" in refused_for(error, "CursorGenerationError")


async def test_a_semantic_cursor_from_before_a_reindex_is_refused_after_a_restart(code_tree, tmp_path):
    (tmp_path / "cache").mkdir()
    env = serve_env(tmp_path)
    cmd, args = codepager_cmd()

    def index() -> int:
        out = subprocess.run(
            [cmd, *args, "index", "--json", "--no-progress", str(code_tree)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        generation: int = json.loads(out.stdout)["generation"]
        return generation

    assert index() == 1
    async with stdio_client(code_tree, tmp_path, env) as client:
        first = structured(
            await client.call_tool(
                "hybrid_search", {"query": "add a number to x", "mode": "semantic", "top_k": 20, "page_size": 5}
            )
        )
        cursor = first["pagination"]["next_cursor"]
        assert cursor is not None and first["results"]["count"] == 5
    edit_a_matching_line(code_tree)
    assert index() == 2
    async with stdio_client(code_tree, tmp_path, env) as client:
        error = await refusal(client, "hybrid_search", {"cursor": cursor})
    assert "index generation 1 is now 2" in refused_for(error, "CursorGenerationError")


async def test_without_a_configured_key_the_server_keeps_one_and_cursors_survive_a_restart(code_tree, tmp_path):
    env = serve_env(tmp_path, secret=None)
    key_file = tmp_path / "cache" / "cursor.key"
    assert not key_file.exists()
    async with stdio_client(code_tree, tmp_path, env) as client:
        first = structured(await client.call_tool("regex_search", {"pattern": "needle", "page_size": 100}))
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = key_file.read_bytes()
    assert len(key.strip()) >= 32
    async with stdio_client(code_tree, tmp_path, env) as client:  # a new process reads the kept key
        rest, responses = await walk(client, "regex_search", {"cursor": first["pagination"]["next_cursor"]})
    assert responses[0]["metadata"]["cache"] == "restored"
    assert locations(page_matches(first) + rest) == cli_full_list(code_tree, "needle")
    assert key_file.read_bytes() == key
    assert not [n for n in os.listdir(key_file.parent) if n.startswith(".cursor.key")]  # no temp file left
