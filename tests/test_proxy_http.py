"""`codepager proxy --transport http` as a real process in front of the tiny test backend
(harness/proxy_backend.py, a stdio subprocess of the proxy), driven by a fastmcp client over
streamable HTTP: tools are listed, a large result is saved as a dataset that SQL reads back,
and a small one passes through with its _meta intact. A web page on another site (DNS
rebinding) cannot use it to call the backend's tools."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.http_server import Auth, HttpServer, rebinding_attack
from harness.proxy_backend import BACKEND_SCRIPT as BACKEND
from harness.proxy_backend import make_rows
from tests.server_helpers import serve_env, structured

pytestmark = pytest.mark.slow  # each test starts a proxy process, which starts its backend


def proxy_server(tmp_path: Path, auth: Auth = "token") -> HttpServer:
    args = ["--data-dir", str(tmp_path / "data"), "--threshold-tokens", "2000", "--", sys.executable, BACKEND]
    return HttpServer(tmp_path, serve_env(tmp_path), extra_args=args, subcommand=["proxy"], auth=auth).start()


async def test_the_proxy_over_streamable_http(tmp_path: Path) -> None:
    server = proxy_server(tmp_path)
    try:
        async with server.client(timeout=60) as c:
            names = {t.name for t in await c.list_tools()}
            assert {"records", "small", "analyze-with-duckdb", "read-dataset-page", "list-saved-datasets"} <= names

            body = structured(await c.call_tool("records", {"n": 2000}))
            ds = body["dataset"]
            assert body["intercepted"] == "saved_as_dataset" and ds["record_count"] == 2000
            assert Path(ds["data_path"]).is_relative_to(tmp_path / "data" / "datasets")
            sql = f"SELECT count(*) AS n, sum(id) AS ids FROM {ds['table']}"
            rows = structured(await c.call_tool("analyze-with-duckdb", {"query": sql}))["results"]["rows"]
            assert rows == [{"n": 2000, "ids": sum(r["id"] for r in make_rows(2000))}]

            small = await c.call_tool_mcp("small", {"name": "http"})
            assert small.content[0].text == "hello http"
            assert small.structured_content == {"greeting": "hello http", "unicode": "héllo ✓"}
            assert small.meta is not None and (small.meta["backend"], small.meta["n"]) == ("proxy-test-backend", 1)
    finally:
        log = server.stop()
    assert "Traceback" not in log, log


def test_a_web_page_on_another_site_cannot_call_the_backend_through_the_proxy(tmp_path: Path) -> None:
    """Shown with --no-auth, where the Host/Origin guard is all that stands in the page's way
    (with a token, the page, which does not have it, is refused by the token check as well)."""
    server = proxy_server(tmp_path, auth="off")
    try:
        foreign = f"attacker.example:{server.port}"
        answers = rebinding_attack(server.url, foreign, f"http://{foreign}", "small", {"name": "rebinding"})
        assert [a.status_code for a in answers] == [403], [a.text[:200] for a in answers]
        error = answers[0].json()["error"]
        assert error["code"] == -32600 and "server.allowed_hosts" in error["message"]
        origin_only = rebinding_attack(
            server.url, f"127.0.0.1:{server.port}", f"http://{foreign}", "small", {"name": "x"}
        )
        assert [a.status_code for a in origin_only] == [403] and "server.allowed_origins" in origin_only[0].text
        local = rebinding_attack(server.url, f"localhost:{server.port}", None, "small", {"name": "local"})
        assert [a.status_code for a in local] == [200, 202, 200] and "hello local" in local[-1].text
    finally:
        log = server.stop()
    assert "Traceback" not in log, log
