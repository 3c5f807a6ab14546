"""DNS rebinding against `codepager serve --transport http`: a web page whose name resolves to
127.0.0.1 calls the server through the user's browser, with its own `Host` and `Origin`. The
server answers only loopback names, its bind address and the configured allow-lists, with a
403 that says what to configure; clients that are not browsers (no Origin) work as before."""

from __future__ import annotations

import httpx
import pytest

from harness.http_server import INITIALIZE, MCP_HEADERS, HttpServer, rebinding_attack
from server.settings import ServerSettings
from server.transports.http_origin import HostOriginGuard
from tests.server_helpers import serve_env, structured


@pytest.fixture(scope="module")
def loopback(tmp_path_factory):
    """The set-up the attack targets: 127.0.0.1, no allow-lists, and --no-auth, where the
    Host/Origin guard alone stands between a rebinding page and the tools (with the default
    token the page, which does not have it, is refused by the token check as well)."""
    from tests.code_tree import write_code_tree

    tmp = tmp_path_factory.mktemp("origin")
    server = HttpServer(write_code_tree(tmp / "repo"), serve_env(tmp), auth="off").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def behind_a_proxy(tmp_path_factory):
    """A server that also answers the name a reverse proxy forwards, and one trusted web client."""
    from tests.code_tree import write_code_tree

    tmp = tmp_path_factory.mktemp("origin-lists")
    env = serve_env(
        tmp, server__allowed_hosts='["code.example.com"]', server__allowed_origins='["https://app.example.com"]'
    )
    server = HttpServer(write_code_tree(tmp / "repo"), env, auth="off").start()
    yield server
    server.stop()


def assert_forbidden(answer: httpx.Response, setting: str) -> str:
    """403 with a JSON-RPC -32600 error (id null) naming the setting to change; returns the message."""
    assert answer.status_code == 403, answer.text
    body = answer.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None and body["error"]["code"] == -32600
    message: str = body["error"]["message"]
    assert setting in message
    return message


@pytest.mark.slow  # a real server process
@pytest.mark.parametrize(
    ("host", "origin"),
    [
        ("attacker.example:{port}", "http://attacker.example:{port}"),
        ("attacker.example:{port}", None),
        ("127.0.0.1:{port}", "http://attacker.example:{port}"),
        ("localhost:{port}", "null"),
    ],
    ids=["rebound-page", "host-only", "origin-only", "opaque-origin"],
)
def test_a_web_page_on_another_site_cannot_call_the_server(loopback, host, origin):
    port = loopback.port
    answers = rebinding_attack(
        loopback.url, host.format(port=port), origin and origin.format(port=port), "regex_search", {"pattern": "needle"}
    )
    assert len(answers) == 1, [a.text[:200] for a in answers]  # refused at initialize; no code was read
    if host.startswith("attacker"):
        message = assert_forbidden(answers[0], "server.allowed_hosts")
        assert "attacker.example" in message and "DNS rebinding" in message
    else:
        assert_forbidden(answers[0], "server.allowed_origins")


@pytest.mark.slow  # a real server process
def test_an_established_session_is_not_reachable_from_a_foreign_host(loopback):
    """The check is on every request, not only at initialize: a session id the page obtained
    some other way gets it nothing."""
    legit = httpx.post(loopback.url, json=INITIALIZE, headers=MCP_HEADERS, timeout=30)
    assert legit.status_code == 200
    session = legit.headers["mcp-session-id"]
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "regex_search", "arguments": {"pattern": "needle"}},
    }
    headers = {**MCP_HEADERS, "mcp-session-id": session, "Host": f"attacker.example:{loopback.port}"}
    assert_forbidden(httpx.post(loopback.url, json=call, headers=headers, timeout=30), "server.allowed_hosts")


@pytest.mark.slow  # a real server process
@pytest.mark.parametrize(
    ("host", "origin"),
    [
        ("127.0.0.1:{port}", None),
        ("localhost:{port}", None),
        ("[::1]:{port}", None),
        ("LOCALHOST", None),
        ("127.0.0.1:{port}", "http://localhost:5173"),
        ("127.0.0.1:{port}", "http://127.0.0.1:{port}"),
        ("localhost:{port}", "https://[::1]"),
    ],
    ids=["ip", "localhost", "ipv6", "no-port", "local-dev-page", "same-origin", "ipv6-origin"],
)
def test_loopback_names_and_local_pages_are_served(loopback, host, origin):
    headers = {**MCP_HEADERS, "Host": host.format(port=loopback.port)}
    if origin is not None:
        headers["Origin"] = origin.format(port=loopback.port)
    answer = httpx.post(loopback.url, json=INITIALIZE, headers=headers, timeout=30)
    assert answer.status_code == 200 and "protocolVersion" in answer.text


@pytest.mark.slow  # a real server process
async def test_a_client_that_is_not_a_browser_searches_as_before(loopback):
    async with loopback.client() as client:
        result = structured(await client.call_tool("regex_search", {"pattern": "needle", "page_size": 5}))
    assert result["results"]["count"] == 5


@pytest.mark.slow  # a real server process
@pytest.mark.parametrize(
    ("host", "origin", "allowed"),
    [
        ("code.example.com", None, True),
        ("Code.Example.com:443", "https://app.example.com", True),
        ("code.example.com", "https://app.example.com:443", True),
        ("localhost:{port}", None, True),
        ("other.example.com", None, False),
        ("code.example.com", "https://app.example.com:8443", False),
        ("code.example.com", "http://app.example.com", False),
        ("code.example.com", "https://evil.example.com", False),
    ],
)
def test_the_allow_lists_admit_exactly_their_names(behind_a_proxy, host, origin, allowed):
    headers = {**MCP_HEADERS, "Host": host.format(port=behind_a_proxy.port), **({"Origin": origin} if origin else {})}
    answer = httpx.post(behind_a_proxy.url, json=INITIALIZE, headers=headers, timeout=30)
    if allowed:
        assert answer.status_code == 200, answer.text
    else:
        message = assert_forbidden(answer, "server.allowed_origins" if origin else "server.allowed_hosts")
        assert "code.example.com" in message if origin is None else "https://app.example.com:443" in message


async def guard_answer(guard: HostOriginGuard, host: str, origin: str | None = None) -> int:
    """The status `guard` gives a request, in process (a bind address other than loopback cannot
    be had on every test machine)."""
    headers = {"Host": host, **({"Origin": origin} if origin else {})}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=guard), base_url=f"http://{host}") as client:
        return (await client.get("/mcp", headers=headers)).status_code


async def ok(scope, receive, send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def test_the_bind_address_is_answered_and_a_wildcard_bind_names_no_host():
    bound = HostOriginGuard(ok, bind_host="192.0.2.7", allowed_hosts=(), allowed_origins=())
    assert await guard_answer(bound, "192.0.2.7:8765") == 200
    assert await guard_answer(bound, "192.0.2.7:8765", "http://192.0.2.7:3000") == 200
    assert await guard_answer(bound, "192.0.2.8:8765") == 403
    wildcard = HostOriginGuard(ok, bind_host="0.0.0.0", allowed_hosts=(), allowed_origins=())
    assert await guard_answer(wildcard, "0.0.0.0:8765") == 403
    assert await guard_answer(wildcard, "127.0.0.1:8765") == 200
    anything = HostOriginGuard(ok, bind_host="0.0.0.0", allowed_hosts=("*",), allowed_origins=("*",))
    assert await guard_answer(anything, "code.example.com", "https://evil.example.com") == 200


@pytest.mark.parametrize(
    ("key", "entry", "error"),
    [
        ("allowed_hosts", "code.example.com:8443", "without scheme or port"),
        ("allowed_hosts", "https://code.example.com", "without scheme or port"),
        ("allowed_origins", "code.example.com", "scheme://host[:port]"),
        ("allowed_origins", "https://code.example.com/mcp", "without a path"),
    ],
)
def test_allow_list_entries_that_cannot_match_are_refused_at_start(key, entry, error):
    with pytest.raises(ValueError, match=error.replace("[", r"\[").replace("]", r"\]")):
        ServerSettings.model_validate({key: [entry]})
    assert ServerSettings.model_validate(
        {"allowed_hosts": ["[::1]", "10.0.0.5", "*"], "allowed_origins": ["http://[::1]:8080", "*"]}
    )
