"""The proxy in front of a backend reached over streamable HTTP, with a hand-written server
(`harness/raw_http_backend.py`) that answers a tools/call either as plain JSON or as a server-sent event,
as large as asked. Before: the SDK's 1 MiB limit on one event, which fastmcp leaves in place,
failed every result over 1 MiB from a server answering with events (the TypeScript SDK's
default), the very results the proxy exists to take; and a JSON reply was read whole however
large. Now both are taken up to `MAX_BACKEND_REPLY_BYTES`, as a stdio backend's are,
and a larger one fails its call with an error saying whose limit it is. The proxy served over HTTP
forwards none of its caller's headers to a backend: it sent the proxy's own bearer token to
every HTTP backend."""

from __future__ import annotations

import gzip
import json
import resource
import zlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import pytest_asyncio
from fastmcp import Client

from harness.http_server import HttpServer
from harness.raw_http_backend import raw_http_backend
from server.proxy import build_proxy_app, config_backends
from server.sdk_shim import RefusedReplyError, _BoundedBody
from tests.proxy_helpers import proxy_settings
from tests.server_helpers import serve_env, structured

pytestmark = pytest.mark.asyncio(loop_scope="module")
MB = 1 << 20
LIMIT = 8 * MB


@pytest.fixture(scope="module")
def backend_url() -> Iterator[str]:
    with raw_http_backend() as url:
        yield url


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(backend_url: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client[Any]]:
    tmp = tmp_path_factory.mktemp("http-proxy")
    config = tmp / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"remote": {"url": backend_url}}}))
    backends = config_backends(config, timeout_s=120, max_message_bytes=LIMIT)
    async with Client(build_proxy_app(proxy_settings(tmp), backends), timeout=180) as c:
        yield c


@pytest.mark.parametrize("sse", [True, False], ids=["event", "json"])
async def test_a_result_over_1_mib_is_saved_whether_sent_as_an_event_or_as_json(client: Client[Any], sse: bool) -> None:
    body = structured(await client.call_tool("lines", {"bytes": 3 * MB, "sse": sse}))
    assert body["intercepted"] == "saved_as_dataset", body
    assert body["dataset"]["record_count"] == 3 * MB // 48
    saved = Path(body["dataset"]["data_path"]).read_text().splitlines()
    assert json.loads(saved[-1])["text"] == f"line {3 * MB // 48 - 1:08d} " + "x" * 34


REPLIES: dict[str, dict[str, Any]] = {
    "event": {"sse": True},
    "json": {},
    # found by a review: the limit counted compressed bytes (a 100 MB reply gzipped to ~1 MB
    # passed an 8 MiB limit and was held whole), and only a lower-case JSON content type
    "gzip": {"gzip": True},
    "json-upper-case": {"ctype": "Application/JSON"},
}


@pytest.mark.slow
@pytest.mark.parametrize("form", list(REPLIES))
async def test_a_reply_over_the_limit_fails_its_call_in_bounded_memory(client: Client[Any], form: str) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = await client.call_tool_mcp("lines", {"bytes": 100 * MB, **REPLIES[form]})
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
    assert result.is_error, text[:300]
    limit_named = "the most codepager proxy reads of one backend reply" in text or f"{LIMIT} byte limit" in text
    assert limit_named, text
    assert grown_mb < 200, f"peak RSS grew {grown_mb:.0f} MB for a refused 100 MB reply"
    # the backend's session survives: the next call is answered, in the same form
    assert structured(await client.call_tool("lines", {"bytes": 2 * MB, **REPLIES[form]}))["intercepted"]


@pytest.mark.slow
async def test_the_proxy_over_http_forwards_none_of_its_callers_headers(tmp_path: Path) -> None:
    """Before: fastmcp's proxy forwards its caller's HTTP headers to HTTP backends, so behind
    `codepager proxy --transport http --auth-token T` each backend received `Authorization:
    Bearer T` on every request, and one configured with a token of its own got both. Now a
    backend sees only what its mcpServers entry gives it."""
    seen = {name: tmp_path / f"{name}.headers" for name in ("plain", "own")}
    with raw_http_backend(seen["plain"]) as plain, raw_http_backend(seen["own"]) as own:
        servers = {
            "plain": {"url": plain},
            "own": {"url": own, "headers": {"Authorization": "Bearer backend-own-token"}},
        }
        config = tmp_path / "mcp.json"
        config.write_text(json.dumps({"mcpServers": servers}))
        args = ["--servers", str(config), "--data-dir", str(tmp_path / "data")]
        proxy = HttpServer(tmp_path, serve_env(tmp_path), extra_args=args, subcommand=["proxy"]).start()
        try:
            await _call_both(proxy)
        finally:
            proxy.stop()
    received = {name: [json.loads(line) for line in log.read_text().splitlines()] for name, log in seen.items()}
    assert received["plain"] and all(headers == [] for headers in received["plain"]), received["plain"]
    assert received["own"] and all(h == ["Bearer backend-own-token"] for h in received["own"]), received["own"]


async def _call_both(proxy: HttpServer) -> None:
    async with proxy.client(timeout=60) as c:
        names = {tool.name for tool in await c.list_tools()}
        assert {"plain_lines", "own_lines"} <= names, names
        for tool in ("plain_lines", "own_lines"):
            assert not (await c.call_tool_mcp(tool, {"bytes": 100})).is_error


async def _body(data: bytes, encoding: str, limit: int) -> bytes | str:
    """What `_BoundedBody` yields for `data` sent in 1,000-byte pieces, or its refusal."""

    class Pieces(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for i in range(0, len(data), 1000):
                yield data[i : i + 1000]

    try:
        return b"".join([piece async for piece in _BoundedBody(Pieces(), limit, encoding)])
    except RefusedReplyError as exc:
        return str(exc)


async def test_every_compression_asked_for_is_inflated_within_the_limit_and_others_refused() -> None:
    text = b'{"rows": "' + b"x" * 100_000 + b'"}'
    raw_deflate = zlib.compressobj(wbits=-15)
    forms = {
        "gzip": gzip.compress(text),
        "deflate": zlib.compress(text),
        "raw-deflate": raw_deflate.compress(text) + raw_deflate.flush(),
    }
    for name, data in forms.items():
        encoding = "gzip" if name == "gzip" else "deflate"
        assert await _body(data, encoding, 200_000) == text, name
        assert "over this client's limit of 50,000 bytes" in str(await _body(data, encoding, 50_000)), name
    assert "malformed" in str(await _body(b"\x1f\x8b" + b"junk" * 500, "gzip", 200_000))
    assert "neither asked for nor reads" in str(await _body(text, "br", 200_000))
    assert await _body(text, "identity", len(text)) == text
    assert "over this client's limit" in str(await _body(text, "identity", len(text) - 1))
