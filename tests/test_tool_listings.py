"""Review of b93898c (_ToolListings): cases the tool-list filter gets wrong."""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage

from server.transports.chunked_client import _ToolListings

GOOD = {"name": "good", "inputSchema": {"type": "object"}}
BAD = {"name": "bad", "inputSchema": {"type": "object", "required": "x"}}


def _listed(request_id: int | str, reply_id: int | str, result: dict[str, Any]) -> dict[str, Any]:
    listings = _ToolListings()
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
