"""Review of b93898c (`ToolListings`): cases the tool-list filter gets wrong."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from fastmcp import Client
from mcp.shared.message import SessionMessage

from server.proxy import build_proxy_app, config_backends
from server.transports.tool_listings import ToolListings
from tests.proxy_helpers import proxy_settings

GOOD = {"name": "good", "inputSchema": {"type": "object"}}
BAD = {"name": "bad", "inputSchema": {"type": "object", "required": "x"}}


def _listed(request_id: int | str, reply_id: int | str, result: dict[str, Any]) -> dict[str, Any]:
    listings = ToolListings()
    listings.sent(SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method="tools/list")))
    reply = types.JSONRPCResponse(jsonrpc="2.0", id=reply_id, result=result)
    listings.received(SessionMessage(reply))
    return reply.result


def test_a_reply_echoing_the_id_as_a_string_is_still_filtered() -> None:
    """The SDK correlates a reply whose id is "7" with request 7 (`coerce_request_id`), so
    it validates that listing; the filter keys its pending ids exactly and skips it, and the
    one bad tool again hides every tool of the backend."""
    result = _listed(7, "7", {"tools": [GOOD, BAD]})
    assert [t["name"] for t in result["tools"]] == ["good"]


def test_a_listing_invalid_outside_its_tools_does_not_blame_every_tool(caplog: pytest.LogCaptureFixture) -> None:
    """A listing whose nextCursor (not a tool) is malformed: every tool is 'dropped', each
    logged with the cursor's error as its own ('the tool: Input should be a valid string'),
    and the listing still fails the SDK's check."""
    with caplog.at_level(logging.WARNING):
        result = _listed(1, 1, {"tools": [GOOD], "nextCursor": 5})
    assert [t["name"] for t in result["tools"]] == ["good"], caplog.messages


#: A streamable-HTTP MCP server written by hand (JSON responses, no session), so it can list
#: tools a fastmcp server never would. It prints its port, then serves until killed.
RAW_HTTP_BACKEND = r"""
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
TOOLS = [
    {"name": "good", "inputSchema": {"type": "object"}},
    {"name": "bad_required", "inputSchema": {"type": "object", "required": "x"}},
    {"name": "no_schema"},
    {"name": "also_good", "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
]
def result_of(method, params):
    if method == "initialize":
        return {"protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw-http", "version": "1"}}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        return {"content": [{"type": "text", "text": "called " + params["name"]}]}
    if method == "ping":
        return {}
    return None
class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass
    def reply(self, status, body=b""):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        self.reply(405)
    def do_DELETE(self):
        self.reply(405)
    def do_POST(self):
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if "id" not in message:
            return self.reply(202)
        result = result_of(message["method"], message.get("params") or {})
        answer = {"jsonrpc": "2.0", "id": message["id"]}
        if result is None:
            answer["error"] = {"code": -32601, "message": "method not found: " + message["method"]}
        else:
            answer["result"] = result
        self.reply(200, json.dumps(answer).encode())
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


@pytest.fixture
def raw_http_backend(tmp_path: Path) -> Iterator[str]:
    """The URL of RAW_HTTP_BACKEND, running in a subprocess."""
    script = tmp_path / "raw_http_backend.py"
    script.write_text(RAW_HTTP_BACKEND)
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield f"http://127.0.0.1:{int(process.stdout.readline())}/mcp"
    finally:
        process.kill()
        process.wait()


async def test_a_malformed_tool_of_an_http_backend_hides_only_that_tool(
    tmp_path: Path, raw_http_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: only stdio backends had their tool lists checked tool by tool; over HTTP the SDK
    validated the list whole, so the two bad tools hid all four (the proxy listed only its own
    tools). Now they are dropped, each named in the log, and the good ones listed and called."""
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"remote": {"url": raw_http_backend}}}))
    backends = config_backends(config, timeout_s=30)
    with caplog.at_level(logging.WARNING):
        async with Client(build_proxy_app(proxy_settings(tmp_path), backends), timeout=60) as client:
            listed = {tool.name for tool in await client.list_tools()}
            called = await client.call_tool("also_good", {"n": 1})
    assert {"good", "also_good"} <= listed and not {"bad_required", "no_schema"} & listed, listed
    assert called.content[0].text == "called also_good"
    dropped = [r.getMessage() for r in caplog.records if "dropped the server's tool" in r.getMessage()]
    assert any("'bad_required'" in m and "inputSchema.required" in m for m in dropped), dropped
    assert any("'no_schema'" in m and "inputSchema" in m for m in dropped), dropped
