"""HTTP auth and request bodies: loopback by default; every request that lacks the token gets a
401 saying how to pass it, decided on the headers before any body byte is read; real clients
that pass it work normally. A body is bounded in size (413) and in idle time (408). (Where the
token comes from when none is configured: tests/test_http_token.py.)"""

from __future__ import annotations

import argparse
import json
import logging
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastmcp import Client
from mcp import MCPError

from harness.commands import codepager_cmd
from harness.http_server import (
    INITIALIZE as INIT,
)
from harness.http_server import (
    MCP_HEADERS as HEADERS,
)
from harness.http_server import (
    HttpServer,
    read_answer,
    send_more_chunks,
    unfinished_post,
)
from harness.patched import patched_codepager_cmd
from server.auth_token import bearer_token
from server.cli import serve_cmd
from server.settings import ServerSettings, load_settings
from tests.server_helpers import serve_env, structured

TOKEN = "test-token-0123456789abcdefghij"


def serving(
    tmp_path_factory: pytest.TempPathFactory, name: str, constants: dict[str, Any] | None = None, **settings: str
) -> Iterator[HttpServer]:
    """A real HTTP server over a small code tree, started with TOKEN (by the environment route,
    CODEPAGER_SERVER__AUTH_TOKEN; the flag is checked below), `settings` (as `serve_env`
    takes them) and the module `constants` set (`harness.patched`)."""
    from tests.code_tree import write_code_tree

    tmp = tmp_path_factory.mktemp(name)
    cmd, args = patched_codepager_cmd(constants) if constants else codepager_cmd()
    env = serve_env(tmp, **settings)
    server = HttpServer(write_code_tree(tmp / "repo"), env, token=TOKEN, program=[cmd, *args]).start()
    yield server
    server.stop()


def still_serves(server: HttpServer) -> bool:
    """Whether an authenticated initialize is answered 200."""
    return httpx.post(server.url, json=INIT, headers=server.headers, timeout=10).status_code == 200


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    yield from serving(tmp_path_factory, "auth")


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


@pytest.mark.slow  # a real server process
def test_binds_loopback_only_by_default(guarded):
    assert ServerSettings().host == "127.0.0.1"
    assert _listening_addresses(guarded.port) == {"0100007F"}  # 127.0.0.1, nothing else


@pytest.mark.slow  # a real server process
@pytest.mark.parametrize(
    ("headers", "invalid"),
    [
        ({}, False),
        ({"Authorization": f"Basic {TOKEN}"}, False),
        ({"Authorization": "Bearer"}, False),
        ({"Authorization": "Bearer wrong-token"}, True),
        ({"Authorization": f"Bearer {TOKEN}x"}, True),
        ({"Authorization": f"Bearer {TOKEN[:-1]}"}, True),
        ({"Authorization": f"Bearer {TOKEN.upper()}"}, True),
        ({"Authorization": "Bearer " + "é" * 10}, True),
    ],
    ids=["none", "other-scheme", "empty", "wrong", "longer", "shorter", "upper-case", "non-ascii"],
)
def test_requests_without_the_token_get_401_saying_how_to_pass_it(guarded, headers, invalid):
    encoded = {k: v.encode() for k, v in headers.items()}  # raw UTF-8 bytes, as a client would send them
    response = httpx.post(guarded.url, json=INIT, headers={**HEADERS, **encoded}, timeout=10)
    assert response.status_code == 401
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None and body["error"]["code"] == -32600
    message = body["error"]["message"]
    assert ("invalid token" in message) == invalid and ("requires a bearer token" in message) != invalid
    assert "Authorization: Bearer <token>" in message and "--auth-token" in message
    assert (
        f'claude mcp add --transport http codepager {guarded.url} --header "Authorization: Bearer <token>"' in message
    )
    challenge = response.headers["www-authenticate"]
    assert challenge == ('Bearer error="invalid_token"' if invalid else "Bearer")
    everything = (response.text + str(response.headers)).lower()
    assert "oauth" not in everything and "register" not in everything


@pytest.mark.slow  # a real server process
def test_the_right_token_gets_through_on_raw_http(guarded):
    response = httpx.post(guarded.url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert response.status_code == 200
    assert "protocolVersion" in response.text


@pytest.mark.slow  # a real server process
async def test_fastmcp_client_with_the_token_searches(guarded):
    async with Client(guarded.url, auth=TOKEN) as client:
        result = structured(await client.call_tool("regex_search", {"pattern": "needle", "page_size": 5}))
    assert result["results"]["count"] == 5


@pytest.mark.slow  # a real server process
@pytest.mark.parametrize(
    ("auth", "told"), [(None, "requires a bearer token"), ("wrong-token-0123456789", "invalid token")]
)
async def test_fastmcp_client_without_the_token_cannot_connect_and_is_told_why(guarded, auth, told):
    """The client sees the 401 (shown above on raw HTTP) as a failed initialize, with its message."""
    with pytest.raises(MCPError, match=f"{told}.*Authorization: Bearer <token>"):
        async with Client(guarded.url, auth=auth):
            pass


def test_the_flag_sets_the_token_and_beats_the_environment(monkeypatch):
    monkeypatch.setenv("CODEPAGER_SERVER__AUTH_TOKEN", "from-the-environment-xyz")
    parser = argparse.ArgumentParser()
    serve_cmd.register(parser.add_subparsers())
    args = parser.parse_args(["serve", "--transport", "http", "--auth-token", TOKEN])
    settings = load_settings(None, serve_cmd.server_overrides(args))
    token = bearer_token(settings.server)
    assert token is not None and token.value == TOKEN


def test_a_blank_token_is_refused_at_start():
    with pytest.raises(ValueError, match="auth_token is empty"):
        ServerSettings(transport="http", auth_token="  ")


def test_risky_setups_are_warned_about(caplog):
    with caplog.at_level(logging.WARNING, logger="server.auth_token"):
        assert bearer_token(ServerSettings(transport="http", host="0.0.0.0", no_auth=True)) is None
        assert bearer_token(ServerSettings(transport="stdio", auth_token=TOKEN)) is None
        short = bearer_token(ServerSettings(transport="http", auth_token="short"))
        assert short is not None and short.value == "short"
        assert bearer_token(ServerSettings(transport="http", host="::1", no_auth=True)) is None
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 4
    assert "without a token" in messages[0] and "anyone who can reach 0.0.0.0" in messages[0]
    assert "ignored on stdio" in messages[1] and "only 5 characters" in messages[2]
    assert "every user of this machine can call the tools" in messages[3]


@pytest.mark.slow  # a real server process
@pytest.mark.parametrize(
    ("body", "codes"),
    [(b"not json", {-32700}), (b'{"jsonrpc":"2.0","id":1}', {-32600, -32602}), (b"[1,2]", {-32600, -32602})],
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


@pytest.mark.slow  # a real server process
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


@pytest.mark.slow  # a real server process
async def test_a_request_under_the_size_limit_is_served(guarded):
    async with Client(guarded.url, auth=TOKEN) as client:
        result = await client.call_tool("regex_search", {"pattern": "n" * (LIMIT // 2)}, raise_on_error=False)
    # past the transport: the tool's own refusal, the pattern's 256 KiB bound
    error = structured(result)["error"]
    assert result.is_error and error["code"] == "invalid_arguments" and "at most 262,144" in error["message"]


MB = 1024 * 1024


@pytest.mark.slow  # a real server process
def test_unauthenticated_bodies_that_never_finish_get_401_at_once_and_hold_nothing(guarded):
    """50 clients without the token each start a 4 MiB chunked body and never finish it. The
    token is checked on the headers: each gets its 401 at once, its connection is closed, and
    the server's memory does not grow by the bodies (it used to read them up to the size limit
    first, +211 MB for as long as the clients kept their connections)."""
    guarded.reset_peak_memory()
    before = guarded.memory_kib("VmRSS")
    clients = []
    try:
        for _ in range(50):
            sock = unfinished_post(guarded.port, {}, b"x" * 65536)
            clients.append(sock)
            answer = read_answer(sock, timeout=10)
            assert answer is not None, "no answer while the body was unfinished: the server is reading it"
            assert answer.status == 401 and "requires a bearer token" in answer.json()["error"]["message"]
            assert answer.closed
            assert send_more_chunks(sock, 4 * MB - 2 * 65536) < 4 * MB - 2 * 65536  # nobody reads the rest
        growth_mib = (guarded.memory_kib("VmHWM") - before) / 1024
    finally:
        for sock in clients:
            sock.close()
    assert growth_mib < 20, f"server peak RSS grew {growth_mib:.0f} MiB"
    assert still_serves(guarded)


BODY_TIMEOUT_S = 1.5


@pytest.fixture(scope="module")
def impatient(tmp_path_factory):
    """A token-guarded server that drops a body after BODY_TIMEOUT_S of silence."""
    yield from serving(tmp_path_factory, "body-timeout", server__request_timeout_s=str(BODY_TIMEOUT_S))


@pytest.mark.slow  # a real server process
@pytest.mark.parametrize("content_length", [None, 4 * MB - 1], ids=["chunked", "content-length"])
def test_an_authenticated_body_that_stalls_is_dropped_after_the_body_timeout(impatient, content_length):
    sock = unfinished_post(impatient.port, {"Authorization": f"Bearer {TOKEN}"}, b"x" * 65536, content_length)
    try:
        answer = read_answer(sock, timeout=BODY_TIMEOUT_S + 20)
    finally:
        sock.close()
    assert answer is not None, "the stalled body was never dropped"
    assert answer.status == 408 and answer.closed
    assert answer.seconds >= BODY_TIMEOUT_S * 0.9
    error = answer.json()["error"]
    assert (
        error["code"] == -32600
        and "server.request_timeout_s" in error["message"]
        and "65536 bytes received" in error["message"]
    )
    assert still_serves(impatient)


@pytest.mark.slow
def test_connections_that_never_finish_their_headers_are_closed_after_the_body_timeout(impatient):
    """Before any header is complete neither the token check nor the body limits can run, and
    uvicorn has no timeout for headers: 50 clients that connect and send nothing each held a
    connection, and a file descriptor, for as long as they liked, so anyone who could reach the
    port could use up the server's connections without a token. Each gets a 408 and is closed
    once server.request_timeout_s has passed without a complete request head. (That the deadline is one
    per head, not an idle timer a trickle of bytes re-arms, is tests/test_http_deadlines.py.)"""
    silent = [socket.create_connection(("127.0.0.1", impatient.port), timeout=10) for _ in range(50)]
    try:
        closed = [read_answer(sock, timeout=BODY_TIMEOUT_S + 20) for sock in silent]
    finally:
        for sock in silent:
            sock.close()
    assert all(answer is not None for answer in closed), "silent connections were kept open"
    for answer in closed:
        assert answer is not None and answer.status == 408 and answer.closed
        error = answer.json()["error"]
        assert error["code"] == -32600 and "headers did not all arrive" in error["message"]
        assert "server.request_timeout_s" in error["message"]
    assert still_serves(impatient)


KIB = 1024


@pytest.fixture(scope="module")
def crowded(tmp_path_factory):
    """A server whose bodies still arriving may hold 1 MiB together (a constant, patched), each
    request at most 256 KiB."""
    budget = {"server.transports.framing.DEFAULT_MAX_BUFFERED_BYTES": MB}
    yield from serving(tmp_path_factory, "body-budget", budget, server__max_request_bytes=str(256 * KIB))


@pytest.mark.slow  # a real server process
def test_bodies_held_open_together_cannot_pass_the_buffer_budget(crowded):
    """Each body is under the size limit and its client sends a byte before the idle timeout,
    so neither 413 nor 408 ever comes: before the budget, 40 such clients held 180 MB of the
    server for as long as they liked (4 MiB each at the default limit), and more held more.
    Together they may hold 64 MiB (here 1 MiB): the body that would pass it is
    answered 503 at once, and what the others held is free again once they go."""
    held = []
    try:
        for _ in range(5):  # 5 x 200 KiB fit in 1 MiB
            held.append(unfinished_post(crowded.port, crowded.headers, b"x" * (200 * KIB), content_length=250 * KIB))
            assert read_answer(held[-1], timeout=1) is None  # held, not refused
        over = unfinished_post(crowded.port, crowded.headers, b"x" * (200 * KIB), content_length=250 * KIB)
        answer = read_answer(over, timeout=10)
        over.close()
    finally:
        for sock in held:
            sock.close()
    assert answer is not None and answer.status == 503 and answer.closed
    error = answer.json()["error"]
    assert error["code"] == -32600 and f"limit of {MB} bytes" in error["message"]
    assert "for all of them together" in error["message"]
    big = json.loads(json.dumps(INIT))
    big["params"]["clientInfo"]["name"] = "n" * (200 * KIB)
    assert (
        httpx.post(crowded.url, json=big, headers=crowded.headers, timeout=10).status_code == 200
    )  # the budget is free


@pytest.mark.slow  # a real server process
@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_a_body_that_is_not_declared_json_gets_a_json_rpc_error_saying_so(guarded, content_type):
    """The SDK answered these with a plain-text 400 "Invalid Content-Type header", which a
    JSON-RPC client cannot show and which did not say what was expected."""
    headers = {"Accept": HEADERS["Accept"], "Authorization": f"Bearer {TOKEN}"}
    if content_type is not None:
        headers["Content-Type"] = content_type
    response = httpx.post(guarded.url, content=json.dumps(INIT).encode(), headers=headers, timeout=10)
    assert response.status_code == 415
    body = response.json()
    assert body["id"] is None and body["error"]["code"] == -32600
    assert "Content-Type: application/json" in body["error"]["message"]
    assert (content_type or "none") in body["error"]["message"]
