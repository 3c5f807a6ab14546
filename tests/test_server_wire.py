"""The server as clients really run it: `codepager serve` as a stdio subprocess, and over
streamable HTTP on a loopback port. Same fastmcp Client, real processes, real pipes/sockets."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from mcp import MCPError

from tests.server_helpers import codepager_cmd, serve_env, structured, walk


def stdio_client(root: Path, tmp: Path) -> Client:
    cmd, args = codepager_cmd()
    return Client(StdioTransport(cmd, [*args, "serve", "--root", str(root)], env=serve_env(tmp), cwd=str(root)))


def cli_full_list(root: Path, pattern: str) -> list[tuple[str, int]]:
    cmd, args = codepager_cmd()
    out = subprocess.run([cmd, *args, "search", "--jsonl", pattern], cwd=root, capture_output=True, text=True, check=True)
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    return [(r["path"], r["line_start"]) for r in rows]


async def test_stdio_paging_to_the_end_equals_the_cli(code_tree, tmp_path):
    async with stdio_client(code_tree, tmp_path) as client:
        matches, responses = await walk(client, "regex_search", {"pattern": "needle", "page_size": 50})
    assert len(responses) == 5
    assert [(m["file"]["path"], m["match"]["line_number"]) for m in matches] == cli_full_list(code_tree, "needle")


async def test_stdio_tampered_cursor_is_minus_32602_on_the_wire(code_tree, tmp_path):
    async with stdio_client(code_tree, tmp_path) as client:
        first = structured(await client.call_tool("regex_search", {"pattern": "needle", "page_size": 10}))
        cursor = first["pagination"]["next_cursor"]
        with pytest.raises(MCPError) as info:
            await client.call_tool("regex_search", {"cursor": cursor[:20] + "x" + cursor[21:]})
        assert info.value.error.code == -32602
        # The server keeps serving after the refusal.
        again = structured(await client.call_tool("regex_search", {"cursor": cursor}))
        assert again["pagination"]["current_page"] == 2


async def test_stdio_restart_between_pages_restores(code_tree, tmp_path):
    async with stdio_client(code_tree, tmp_path) as client:
        first = structured(await client.call_tool("regex_search", {"pattern": "needle", "page_size": 100}))
    async with stdio_client(code_tree, tmp_path) as client:  # a new server process
        rest, responses = await walk(client, "regex_search", {"cursor": first["pagination"]["next_cursor"]})
    assert responses[0]["metadata"]["cache"] == "restored"
    all_matches = first["results"]["matches"] + rest
    assert [(m["file"]["path"], m["match"]["line_number"]) for m in all_matches] == cli_full_list(code_tree, "needle")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def http_server(code_tree, tmp_path):
    port = _free_port()
    cmd, args = codepager_cmd()
    proc = subprocess.Popen(
        [cmd, *args, "serve", "--root", str(code_tree), "--transport", "http", "--port", str(port)],
        env=serve_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {proc.stderr.read().decode()}")
        try:
            httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=1)
            break
        except httpx.TransportError:
            time.sleep(0.2)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(timeout=10)


async def test_streamable_http_paging(http_server, code_tree):
    async with Client(http_server) as client:
        matches, responses = await walk(client, "regex_search", {"pattern": "needle", "page_size": 60})
    assert len(responses) == 4
    assert [(m["file"]["path"], m["match"]["line_number"]) for m in matches] == cli_full_list(code_tree, "needle")


def test_stdout_carries_only_protocol(code_tree, tmp_path):
    """Anything but JSON-RPC on stdout would corrupt a stdio session: send garbage, then a valid
    initialize, and check every stdout line parses as JSON-RPC."""
    cmd, args = codepager_cmd()
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    proc = subprocess.run(
        [cmd, *args, "serve", "--root", str(code_tree)],
        input="this is not json\n" + json.dumps(init) + "\n", env=serve_env(tmp_path),
        capture_output=True, text=True, timeout=60,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert lines, proc.stderr
    for line in lines:
        assert json.loads(line)["jsonrpc"] == "2.0"
    assert any(json.loads(ln).get("id") == 1 and "result" in json.loads(ln) for ln in lines)
