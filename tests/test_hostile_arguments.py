"""Validation amplification (issue 36.4), against a real `codepager serve --transport http`.

A call whose arguments hold a million wrong items, or hundreds of thousands of unknown names,
fits in the 4 MiB request cap; pydantic made one error of each and the server formatted them
all on its event loop before cutting the message to ten: 19-48 s of CPU and +2.3 GB for
`include_patterns: [0, 0, ...]`, while every other client's calls waited. Client B pings back
to back while client A's hostile call is handled; the slowest ping is how long B was held.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.http_server import INITIALIZE, HttpServer
from tests.hostile_helpers import INVALID_PARAMS, MB, PeakRssGrowth
from tests.server_helpers import serve_env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    root = tmp_path_factory.mktemp("root")
    (root / "a.py").write_text("needle = 1\n")
    srv = HttpServer(root, serve_env(tmp_path_factory.mktemp("serve"))).start()
    yield srv
    log = srv.stop()
    assert "Traceback" not in log, log[-3000:]


def _session(server: HttpServer) -> dict[str, str]:
    """The headers of a new, initialized MCP session (with the server's token)."""
    answer = httpx.post(server.url, json=INITIALIZE, headers=server.headers, timeout=60)
    headers = {**server.headers, "mcp-session-id": answer.headers["mcp-session-id"]}
    httpx.post(server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers, timeout=60)
    return headers


def _message(answer: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of an answer, sent as JSON or as one server-sent event."""
    if answer.headers["content-type"].startswith("application/json"):
        message: dict[str, Any] = answer.json()
        return message
    data = [line.removeprefix("data: ") for line in answer.text.splitlines() if line.startswith("data: ")]
    return dict(json.loads(data[-1]))


@dataclass
class Attack:
    answer: dict[str, Any]
    seconds: float  # until the hostile call was answered
    growth_bytes: int  # of the server's peak RSS meanwhile
    slowest_ping_s: float  # of client B's pings meanwhile


def attack(server: HttpServer, tool: str, arguments: dict[str, Any]) -> Attack:
    """Client A sends `tool(arguments)`; client B pings until A is answered."""
    hostile, other = _session(server), _session(server)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    body = json.dumps(call, separators=(",", ":")).encode()
    assert 3 * MB < len(body) < 4 * MB  # under the request cap: parsed and validated
    answered: dict[str, Any] = {}

    def send() -> None:
        start = time.monotonic()
        answer = httpx.post(server.url, content=body, headers=hostile, timeout=300)
        answered.update(message=_message(answer), seconds=time.monotonic() - start)

    pings = [0.0]
    with PeakRssGrowth(server.pid) as rss:
        thread = threading.Thread(target=send)
        thread.start()
        while thread.is_alive():
            start = time.monotonic()
            pong = httpx.post(
                server.url, json={"jsonrpc": "2.0", "id": 3, "method": "ping"}, headers=other, timeout=300
            )
            pings.append(time.monotonic() - start)
            assert _message(pong)["result"] == {}
        thread.join()
    return Attack(answered["message"], answered["seconds"], rss.growth_bytes, max(pings))


def test_a_million_wrong_list_items_are_refused_at_once_and_hold_no_other_client(server: HttpServer) -> None:
    """1.9M items: before, 48 s on this machine (19 s in the report), +2.3 GB, and a ping of
    another client waited all of it. Now pydantic checks the list's length (`maxItems` 1,000)
    before its items: one error, answered in well under a second."""
    hit = attack(server, "regex_search", {"pattern": "needle", "include_patterns": [0] * 1_900_000})
    assert hit.seconds < 5, hit
    assert hit.slowest_ping_s < 5, hit
    assert hit.growth_bytes < 100 * MB, hit
    error = hit.answer["error"]
    assert error["code"] == INVALID_PARAMS and "include_patterns" in error["message"], error
    assert "at most 1000 items" in error["message"] and len(error["message"]) < 1_000, error


@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    [
        ("regex_search", {"pattern": "needle", **{f"{i:x}": 0 for i in range(380_000)}}, "380,001 arguments sent"),
        ("list-saved-datasets", {"filter": {f"{i:x}": 0 for i in range(380_000)}}, "380,000 unknown keys"),
    ],
    ids=["arguments", "filter-keys"],
)
def test_hundreds_of_thousands_of_unknown_names_are_one_error(
    server: HttpServer, tool: str, arguments: dict[str, Any], says: str
) -> None:
    """380,000 unknown names: before, one pydantic error each, built and formatted (8.6 s and
    +560 MB for the arguments on this machine); now one error, before pydantic sees them: a
    count of the arguments (no tool takes more than 32), and the filter's keys in its model.
    What remains is the MCP SDK's own parsing of 3.5 MiB of JSON."""
    hit = attack(server, tool, arguments)
    error = hit.answer["error"]
    assert error["code"] == INVALID_PARAMS and says in error["message"] and len(error["message"]) < 1_000, error
    assert hit.growth_bytes < 200 * MB, hit


def test_bounds_stay_out_of_the_listing_and_honest_calls_pass(server: HttpServer, tmp_path: Path) -> None:
    """The bounds cost tools/list nothing (it is paid for in every conversation), and a call at
    a bound is served."""
    session = _session(server)
    listing = _message(
        httpx.post(server.url, json={"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, headers=session)
    )
    assert "maxItems" not in json.dumps(listing) and "maxLength" not in json.dumps(listing)
    call = {"pattern": "needle", "include_patterns": ["*.py"] * 1_000}
    request = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "regex_search", "arguments": call}}
    answer = _message(httpx.post(server.url, json=request, headers=session, timeout=120))
    assert answer["result"]["structuredContent"]["results"]["count"] == 1, answer
