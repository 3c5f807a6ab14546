"""Calls invalid as sent (issue 37.8): their channel follows the protocol version the client
negotiated, and a parameter named as a sibling search tool names it says what this tool calls it.

Real fastmcp Clients in memory, one negotiating each protocol version this SDK speaks
(`harness.protocol_clients`). Up to MCP 2025-06-18 a refusal is JSON-RPC -32602; from 2025-11-25
the spec answers input validation errors as tool execution errors, which the model sees and can
correct: an isError result. Both carry the same `code` and `hint`. An unknown tool is a protocol
error at every version.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from fastmcp import FastMCP
from mcp import MCPError
from mcp_types import INVALID_PARAMS

from harness.protocol_clients import PROTOCOL_VERSIONS, client_at
from server.app import build_app
from server.errors import REFUSALS
from sessions import CursorCodec
from sessions.cursor import SEARCH_KIND
from tests.code_tree import write_code_tree
from tests.hostile_helpers import refused_async
from tests.server_helpers import SECRET, make_settings, structured

MAX_AGE_S = 3600
#: The versions whose clients get a refusal as JSON-RPC -32602.
PROTOCOL_ERROR_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18")


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> FastMCP[Any]:
    tmp = tmp_path_factory.mktemp("refusals")
    settings = make_settings(write_code_tree(tmp / "repo"), tmp, sessions={"cursor_max_age_s": MAX_AGE_S})
    return build_app(settings)


def expired(cursor: str) -> str:
    """The genuine cursor's search, sealed with the right key one max age and 100 s ago."""
    state = CursorCodec(SECRET).decode(cursor, kind=SEARCH_KIND)
    return CursorCodec(SECRET, clock=lambda: time.time() - MAX_AGE_S - 100).encode(state)


def test_every_version_is_covered() -> None:
    assert set(PROTOCOL_ERROR_VERSIONS) < set(PROTOCOL_VERSIONS)
    assert {"2025-11-25", "2026-07-28"} <= set(PROTOCOL_VERSIONS) - set(PROTOCOL_ERROR_VERSIONS)


@pytest.mark.parametrize("version", PROTOCOL_VERSIONS)
async def test_refusals_take_the_channel_of_the_negotiated_version(app: FastMCP[Any], version: str) -> None:
    async with client_at(app, version) as c:
        assert c.protocol_version == version
        first = structured(await c.call_tool("regex_search", {"pattern": "needle", "page_size": 5}))
        cursor = first["pagination"]["next_cursor"]
        # Refused by fastmcp's validation, by the tool wrapper (a cursor's), or in the tool body.
        cases = [
            ("invalid_arguments", "regex_search", {"pattern": "needle", "page_size": 0}),
            ("invalid_cursor", "regex_search", {"cursor": "not-a-cursor"}),
            ("cursor_expired", "regex_search", {"cursor": expired(cursor)}),
            ("cursor_mismatch", "regex_search", {"cursor": cursor, "pattern": "return"}),
            ("invalid_arguments", "regex_search", {"pattern": "  "}),
            ("invalid_cursor", "hybrid_search", {"cursor": cursor}),
        ]
        for code, tool, args in cases:
            if version in PROTOCOL_ERROR_VERSIONS:
                with pytest.raises(MCPError) as info:
                    await c.call_tool(tool, args)
                error = info.value.error
                assert error.code == INVALID_PARAMS and isinstance(error.data, dict), (code, error)
                assert (error.data["code"], error.data["hint"]) == (code, REFUSALS[code])
            else:
                result = await c.call_tool(tool, args, raise_on_error=False)
                assert result.is_error, (code, result)
                body = result.structured_content
                assert body is not None and json.loads(result.content[0].text) == body
                assert (body["error"]["code"], body["error"]["hint"]) == (code, REFUSALS[code])
                assert body["error"]["message"]
        # An unknown tool is a protocol error whatever the version.
        with pytest.raises(MCPError) as unknown:
            await c.call_tool("no_such_tool", {})
        assert unknown.value.error.code == INVALID_PARAMS
        # A tool this server used to list says what does its work now.
        with pytest.raises(MCPError) as former:
            await c.call_tool("semantic_search", {"query": "needle"})
        assert 'use hybrid_search with mode="semantic"' in former.value.error.message, former.value.error
        # And the server goes on paging.
        assert structured(await c.call_tool("regex_search", {"cursor": cursor}))["pagination"]["current_page"] == 2


async def test_a_parameter_of_a_sibling_search_tool_says_what_this_tool_calls_it(app: FastMCP[Any]) -> None:
    """`query` sent to regex_search said only "Unexpected keyword argument"."""
    async with client_at(app, "2026-07-28") as c:
        message = await refused_async(c, "regex_search", {"query": "needle"})
        assert "query: Unexpected keyword argument" in message and "use `pattern`" in message, message
        message = await refused_async(c, "hybrid_search", {"pattern": "needle"})
        assert "use `query`: hybrid_search's name for what regex_search calls `pattern`" in message, message
        message = await refused_async(c, "regex_search", {"pattern": "needle", "top_k": 3})
        assert "`top_k` is an option of hybrid_search only" in message, message
        message = await refused_async(c, "regex_search", {"pattern": "needle", "include_snippet": False})
        assert "snippet_length=0 leaves the text out" in message, message
        message = await refused_async(c, "hybrid_search", {"query": "needle", "stats_only": True})
        assert '`stats_only` is now stats="only"' in message, message
        message = await refused_async(c, "regex_search", {"pattern": "needle", "nonsense": 1})
        assert "nonsense: Unexpected keyword argument" in message and "(use" not in message, message
