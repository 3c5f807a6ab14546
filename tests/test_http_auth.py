"""HTTP auth: loopback by default; with a token, fastmcp's auth middleware answers 401 to every
request that lacks it, and real clients that pass it work normally."""

from __future__ import annotations

import argparse
import logging

import httpx
import pytest
from fastmcp import Client
from mcp import MCPError

from server.auth import BearerTokenVerifier, http_auth
from server.cli import serve_cmd
from server.settings import ServerSettings, load_settings
from tests.http_server import HttpServer
from tests.server_helpers import serve_env, structured

TOKEN = "test-token-0123456789abcdefghij"
INIT = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}  # fmt: skip
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    from tests.conftest import write_code_tree

    tmp = tmp_path_factory.mktemp("auth")
    env = serve_env(tmp)
    env["CODEPAGER_SERVER__AUTH_TOKEN"] = TOKEN  # the environment route; the flag is checked below
    server = HttpServer(write_code_tree(tmp / "repo"), env).start()
    yield server
    server.stop()


def _listening_addresses(port: int) -> set[str]:
    """Local addresses of LISTEN sockets on `port`, from /proc (IPv4 and IPv6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in list(f)[1:]:
                local, state = line.split()[1], line.split()[3]
                addr, hex_port = local.split(":")
                if state == "0A" and int(hex_port, 16) == port:
                    found.add(addr)
    return found


def test_binds_loopback_only_by_default(guarded):
    assert ServerSettings().host == "127.0.0.1"
    assert _listening_addresses(guarded.port) == {"0100007F"}  # 127.0.0.1, nothing else


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong-token"}, {"Authorization": f"Basic {TOKEN}"},
                {"Authorization": f"Bearer {TOKEN}x"}, {"Authorization": "Bearer"}],
    ids=["none", "wrong", "other-scheme", "longer", "empty"],
)  # fmt: skip
def test_requests_without_the_token_get_401(guarded, headers):
    response = httpx.post(guarded.url, json=INIT, headers={**HEADERS, **headers}, timeout=10)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].lower().startswith("bearer")


def test_the_right_token_gets_through_on_raw_http(guarded):
    response = httpx.post(guarded.url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert response.status_code == 200
    assert "protocolVersion" in response.text


async def test_fastmcp_client_with_the_token_searches(guarded):
    async with Client(guarded.url, auth=TOKEN) as client:
        result = structured(await client.call_tool("regex_search", {"pattern": "needle", "page_size": 5}))
    assert result["results"]["count"] == 5


@pytest.mark.parametrize("auth", [None, "wrong-token-0123456789"])
async def test_fastmcp_client_without_the_token_cannot_connect(guarded, auth):
    """The client sees the 401 (shown above on raw HTTP) as a failed initialize."""
    with pytest.raises(MCPError, match="error response"):
        async with Client(guarded.url, auth=auth):
            pass


def test_the_flag_sets_the_token_and_beats_the_environment(monkeypatch):
    monkeypatch.setenv("CODEPAGER_SERVER__AUTH_TOKEN", "from-the-environment-xyz")
    parser = argparse.ArgumentParser()
    serve_cmd.register(parser.add_subparsers())
    args = parser.parse_args(["serve", "--transport", "http", "--auth-token", TOKEN])
    settings = load_settings(None, serve_cmd.server_overrides(args))
    verifier = http_auth(settings.server)
    assert isinstance(verifier, BearerTokenVerifier)
    assert verifier._token == TOKEN.encode()


async def test_verifier_accepts_exactly_the_token():
    verifier = BearerTokenVerifier(TOKEN)
    assert (await verifier.verify_token(TOKEN)) is not None
    for bad in ("", TOKEN[:-1], TOKEN + " ", TOKEN.upper(), "é" * 10):
        assert await verifier.verify_token(bad) is None
    with pytest.raises(ValueError, match="empty"):
        BearerTokenVerifier("  ")


def test_risky_setups_are_warned_about(caplog):
    with caplog.at_level(logging.WARNING, logger="server.auth"):
        assert http_auth(ServerSettings(transport="http", host="0.0.0.0")) is None
        assert http_auth(ServerSettings(transport="stdio", auth_token=TOKEN)) is None
        assert http_auth(ServerSettings(transport="http", auth_token="short")) is not None
        assert http_auth(ServerSettings(transport="http", host="::1")) is None
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3
    assert "without --auth-token" in messages[0] and "ignored on stdio" in messages[1] and "only 5 characters" in messages[2]


@pytest.mark.parametrize(
    ("body", "codes"), [(b"not json", {-32700}), (b'{"jsonrpc":"2.0","id":1}', {-32600, -32602}), (b"[1,2]", {-32600, -32602})]
)
def test_malformed_json_rpc_over_http_is_a_json_rpc_error(guarded, body, codes):
    """The SDK's HTTP transport answers these itself (400 + a JSON-RPC error body)."""
    headers = {**HEADERS, "Authorization": f"Bearer {TOKEN}"}
    response = httpx.post(guarded.url, content=body, headers=headers, timeout=10)
    assert response.status_code == 400
    assert response.json()["error"]["code"] in codes
    assert httpx.post(guarded.url, json=INIT, headers=headers, timeout=10).status_code == 200


LIMIT = 4 * 1024 * 1024  # the default server.max_request_bytes


def _over_the_limit(size: int):
    """A streamed body (chunked transfer, no Content-Length) of `size` bytes."""
    yield b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"regex_search","arguments":{"pattern":"'
    for _ in range(size // 65536):
        yield b"x" * 65536


@pytest.mark.parametrize("streamed", [False, True], ids=["content-length", "chunked-transfer"])
def test_a_request_over_the_size_limit_gets_413_with_a_json_rpc_error(guarded, streamed):
    headers = {**HEADERS, "Authorization": f"Bearer {TOKEN}"}
    body = _over_the_limit(LIMIT + 65536)
    content = body if streamed else b"".join(body)
    response = httpx.post(guarded.url, content=content, headers=headers, timeout=30)
    assert response.status_code == 413
    error = response.json()["error"]
    assert response.json()["id"] is None and error["code"] == -32600
    assert f"limit of {LIMIT} bytes" in error["message"] and "server.max_request_bytes" in error["message"]
    assert httpx.post(guarded.url, json=INIT, headers=headers, timeout=10).status_code == 200


async def test_a_request_under_the_size_limit_is_served(guarded):
    async with Client(guarded.url, auth=TOKEN) as client:
        result = await client.call_tool("regex_search", {"pattern": "n" * (LIMIT // 2)}, raise_on_error=False)
    assert result.is_error and structured(result)["error"]["code"] == "invalid_query"  # the tool's own refusal
