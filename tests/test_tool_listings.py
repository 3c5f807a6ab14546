"""Review of b93898c (`ToolListings`): cases the tool-list filter gets wrong."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from fastmcp import Client
from mcp.shared.message import SessionMessage

from harness.raw_http_backend import raw_http_backend
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


async def test_a_malformed_tool_of_an_http_backend_hides_only_that_tool(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: only stdio backends had their tool lists checked tool by tool; over HTTP the SDK
    validated the list whole, so the two bad tools hid all four (the proxy listed only its own
    tools). Now they are dropped, each named in the log, and the good ones listed and called."""
    config = tmp_path / "mcp.json"
    with raw_http_backend() as url, caplog.at_level(logging.WARNING):
        config.write_text(json.dumps({"mcpServers": {"remote": {"url": url}}}))
        backends = config_backends(config, timeout_s=30)
        async with Client(build_proxy_app(proxy_settings(tmp_path), backends), timeout=60) as client:
            listed = {tool.name for tool in await client.list_tools()}
            called = await client.call_tool("also_good", {"n": 1})
    assert {"good", "also_good"} <= listed and not {"bad_required", "no_schema"} & listed, listed
    assert called.content[0].text == "called also_good"
    dropped = [r.getMessage() for r in caplog.records if "dropped the server's tool" in r.getMessage()]
    assert any("'bad_required'" in m and "inputSchema.required" in m for m in dropped), dropped
    assert any("'no_schema'" in m and "inputSchema" in m for m in dropped), dropped
