"""The proxy app end to end with a real backend: harness/proxy_backend.py running as a stdio
subprocess behind `build_proxy_app`, driven by a real fastmcp client. Pass-through is exact,
large results become datasets that SQL and read-dataset-page can read back, cursors are
signed, backend errors, timeouts and crashes reach the client as errors (and a crashed backend
is started again), and the proxy's own answers satisfy the backend's declared output schema."""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from fastmcp import Client, FastMCP
from fastmcp.client.transports import FastMCPTransport

from harness.proxy_backend import BACKEND_SCRIPT, make_rows
from harness.proxy_backend import app as backend_app
from harness.results import text_of
from server.output import CHARS_PER_TOKEN, estimate_tokens
from server.proxy import Backend, build_proxy_app, command_backend
from server.proxy.answer import answer_budget
from tests.hostile_helpers import refused_async
from tests.proxy_helpers import THRESHOLD, proxy_settings, wire
from tests.server_helpers import structured

pytestmark = pytest.mark.asyncio(loop_scope="module")
BACKEND = [sys.executable, BACKEND_SCRIPT]


def sizes(result: Any) -> tuple[int, int]:
    """(bytes of the content blocks, of the structured content), as the proxy measures a result:
    text as UTF-8, other blocks as their JSON."""
    content = sum(
        len(b.text.encode()) if b.type == "text" else len(b.model_dump_json(by_alias=True, exclude_none=True))
        for b in result.content
    )
    structured_bytes = len(json.dumps(result.structured_content, separators=(",", ":"), ensure_ascii=False).encode())
    return content, structured_bytes if result.structured_content is not None else 0


def tokens(result: Any) -> tuple[int, int]:
    """(estimated tokens of the content blocks, of the structured content), by the one estimate
    every codepager answer is sized with."""
    content = sum(
        estimate_tokens(b.text if b.type == "text" else b.model_dump_json(by_alias=True, exclude_none=True))
        for b in result.content
    )
    if result.structured_content is None:
        return content, 0
    return content, estimate_tokens(json.dumps(result.structured_content, separators=(",", ":"), ensure_ascii=False))


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("proxy")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(tmp: Path):
    app = build_proxy_app(proxy_settings(tmp), [command_backend(BACKEND, name="tiny", timeout_s=3)])
    async with Client(app) as c:
        await c.list_tools()  # caches output schemas: the client now validates structured content
        yield c


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def direct():
    async with Client(command_backend(BACKEND).transport) as c:
        yield c


async def saved(client: Client[Any], tool: str, args: dict[str, Any]) -> dict[str, Any]:
    body = structured(await client.call_tool(tool, args))
    assert body["intercepted"] == "saved_as_dataset", body
    return body


@pytest.mark.slow
async def test_small_results_and_errors_pass_through_exactly(client: Client[Any], direct: Client[Any]) -> None:
    for tool, args in (("small", {"name": "ünïcode"}), ("records", {"n": 3}), ("fail", {"message": "nope"})):
        via_proxy = await client.call_tool_mcp(tool, args)
        straight = await direct.call_tool_mcp(tool, args)
        assert json.dumps(wire(via_proxy), sort_keys=True) == json.dumps(wire(straight), sort_keys=True), tool
    small = await client.call_tool_mcp("small", {})
    assert small.meta is not None and small.meta["backend"] == "proxy-test-backend"
    pid = await client.call_tool("pid", {})  # fastmcp's wrapped scalar still parses on the client
    assert isinstance(pid.data, int) and pid.structured_content == {"result": pid.data}


@pytest.mark.slow
async def test_intercepted_tools_are_listed_without_an_output_schema(client: Client[Any], direct: Client[Any]) -> None:
    proxied = {t.name: t for t in await client.list_tools()}
    straight = {t.name: t for t in await direct.list_tools()}
    assert straight["structured_records"].output_schema is not None
    assert proxied["structured_records"].output_schema is None
    assert proxied["structured_records"].input_schema == straight["structured_records"].input_schema


@pytest.mark.slow
async def test_a_large_json_result_is_saved_described_and_queryable(client: Client[Any], tmp: Path) -> None:
    body = await saved(client, "records", {"n": 3000, "mixed": True})
    ds = body["dataset"]
    assert ds["record_count"] == 3000 and ds["format"] == "json_records" and ds["server"] == "tiny"
    assert ds["fields"]["value"] == "integer | string" and ds["estimated_tokens"] > THRESHOLD
    assert ds["distinct_values"]["kind"] == [
        {"value": "alpha", "count": 1000},
        {"value": "beta", "count": 1000},
        {"value": "gamma", "count": 1000},
    ]
    assert estimate_tokens(json.dumps(body)) * 2 <= answer_budget(THRESHOLD)  # the answer is small, both copies
    data = Path(ds["data_path"])
    meta = json.loads(Path(ds["metadata_path"]).read_text())
    day = meta["timestamp"][:10].replace("-", "/")
    assert data == tmp / "data" / "datasets" / day / f"dataset_{ds['id']}_data.jsonl"
    assert [json.loads(line) for line in data.read_text().splitlines()] == make_rows(3000, mixed=True)
    assert {"id", "timestamp", "tool", "server", "original_size", "record_count", "schema", "summary"} <= set(meta)
    assert meta["summary"]["total_records"] == 3000 and meta["arguments"] == {"n": 3000, "mixed": True}
    assert meta["schema"]["sampled_records"] == 100

    sql = f"SELECT kind, count(*) AS n, sum(id) AS ids FROM {ds['table']} GROUP BY kind ORDER BY kind"
    rows = structured(await client.call_tool("analyze-with-duckdb", {"query": sql}))["results"]["rows"]
    truth = Counter(r["kind"] for r in make_rows(3000))
    assert [(r["kind"], r["n"]) for r in rows] == sorted(truth.items())
    assert sum(r["ids"] for r in rows) == sum(range(3000))
    for example in body["example_sql"]:
        assert structured(await client.call_tool("analyze-with-duckdb", {"query": example}))["results"]["rows"], example


@pytest.mark.slow
async def test_the_proxys_own_tools_answer_within_its_threshold(client: Client[Any]) -> None:
    """analyze-with-duckdb gets the proxy's threshold, not the search server's
    20,000-token ceiling: 300 rows (~30 KB) go to a file instead of being sent inline."""
    table = (await saved(client, "records", {"n": 3000}))["dataset"]["table"]
    result = await client.call_tool("analyze-with-duckdb", {"query": f"SELECT * FROM {table} ORDER BY id LIMIT 300"})
    body = structured(result)
    assert body["results"]["mode"] == "file_ref" and body["results"]["total_count"] == 300
    assert max(tokens(result)) <= THRESHOLD
    few = structured(await client.call_tool("analyze-with-duckdb", {"query": f"SELECT * FROM {table} LIMIT 20"}))
    assert few["results"]["mode"] == "inline" and len(few["results"]["rows"]) == 20


@pytest.mark.slow
async def test_the_proxys_sql_runs_under_its_own_duckdb_limits(client: Client[Any]) -> None:
    """[proxy.sql]'s threads and memory_limit (2 and 1GB by default), not [sql]'s (1 and 512MB),
    are what the proxy's DuckDB connections run with."""
    sql = "SELECT current_setting('threads') AS threads, current_setting('memory_limit') AS memory"
    (row,) = structured(await client.call_tool("analyze-with-duckdb", {"query": sql}))["results"]["rows"]
    assert row["threads"] == 2 and row["memory"].startswith(("1.0 GB", "953.6 MiB")), row


@pytest.mark.slow
async def test_nested_structured_and_text_results(client: Client[Any]) -> None:
    nested = (await saved(client, "nested_records", {"n": 800}))["dataset"]
    assert nested["records_from"] == "text:rows" and nested["envelope"]["total"] == 800
    # structured_records declares an output schema; the client validated the answer against it
    shaped = (await saved(client, "structured_records", {"n": 800}))["dataset"]
    assert shaped["records_from"] == "structuredContent:items" and shaped["record_count"] == 800
    lines = await saved(client, "text", {"lines": 1400})
    assert lines["dataset"]["format"] == "text_lines" and lines["dataset"]["record_count"] == 1400
    sql = f"SELECT count(*) AS n FROM {lines['dataset']['table']} WHERE text LIKE 'ERROR%'"
    rows = structured(await client.call_tool("analyze-with-duckdb", {"query": sql}))["results"]["rows"]
    assert rows == [{"n": 1400 // 7}]


@pytest.mark.slow
async def test_read_dataset_page_walks_every_record_with_signed_cursors(client: Client[Any]) -> None:
    dataset_id = (await saved(client, "records", {"n": 1500}))["dataset"]["id"]
    records, cursor, pages = [], None, 0
    while True:
        args: dict[str, Any] = {"dataset_id": dataset_id, "page_size": 400}
        if cursor:
            args["cursor"] = cursor
        result = await client.call_tool("read-dataset-page", args)
        assert max(tokens(result)) <= THRESHOLD  # cut to the proxy's threshold, losslessly
        page = structured(result)
        records += page["results"]["records"]
        pages += 1
        cursor = page["pagination"]["next_cursor"]
        if cursor is None:
            break
    assert records == make_rows(1500) and pages > 1500 // 400

    first = structured(await client.call_tool("read-dataset-page", {"dataset_id": dataset_id, "page_size": 10}))
    good = first["pagination"]["next_cursor"]
    other_id = (await saved(client, "text", {"lines": 900}))["dataset"]["id"]
    tampered = good[:-2] + ("AA" if not good.endswith("AA") else "BB")
    for bad_args in ({"dataset_id": dataset_id, "cursor": tampered}, {"dataset_id": other_id, "cursor": good}):
        await refused_async(client, "read-dataset-page", bad_args)


@pytest.mark.slow
async def test_list_saved_datasets_filters(client: Client[Any]) -> None:
    listed = structured(await client.call_tool("list-saved-datasets", {"filter": {"tool": "text", "server": "tiny"}}))
    assert listed["count"] >= 1 and {d["tool"] for d in listed["datasets"]} == {"text"}
    assert structured(await client.call_tool("list-saved-datasets", {"filter": {"server": "elsewhere"}}))["count"] == 0
    await refused_async(client, "list-saved-datasets", {"filter": {"date_from": "yesterday"}})


@pytest.mark.slow
async def test_concurrent_large_calls_each_get_their_own_complete_dataset(client: Client[Any]) -> None:
    bodies = await asyncio.gather(*(saved(client, "records", {"n": 600 + i}) for i in range(6)))
    ids = {b["dataset"]["id"] for b in bodies}
    assert len(ids) == 6
    for i, body in enumerate(bodies):
        data = Path(body["dataset"]["data_path"])
        assert len(data.read_text().splitlines()) == 600 + i
        assert not list(data.parent.glob(".*.tmp"))


@pytest.mark.slow
async def test_timeouts_and_crashes_are_errors_and_a_crashed_backend_restarts(client: Client[Any]) -> None:
    slow = await client.call_tool("slow", {"seconds": 20}, raise_on_error=False)
    assert slow.is_error and "timed out" in text_of(slow.content[0])
    before = (await client.call_tool_mcp("pid", {})).structured_content
    crashed = await client.call_tool("crash", {}, raise_on_error=False)
    assert crashed.is_error
    after = (await client.call_tool_mcp("pid", {})).structured_content
    assert after != before
    assert (await saved(client, "records", {"n": 700}))["dataset"]["record_count"] == 700


def in_memory_proxy(tmp: Path, **proxy: Any) -> FastMCP:
    return build_proxy_app(proxy_settings(tmp, **proxy), [Backend("tiny", FastMCPTransport(backend_app), None)])


async def test_proxy_sql_settings_are_what_the_proxys_queries_run_with(tmp_path: Path) -> None:
    """`[proxy.sql]`'s keys reach the proxy's DuckDB connections (the keys it leaves out are
    `[sql]`'s: `tests/test_settings_layout.py`)."""
    sql = "SELECT current_setting('threads') AS threads, current_setting('memory_limit') AS memory"
    async with Client(in_memory_proxy(tmp_path, sql={"threads": 3, "memory_limit": "256MB"})) as c:
        (row,) = structured(await c.call_tool("analyze-with-duckdb", {"query": sql}))["results"]["rows"]
    assert row["threads"] == 3 and row["memory"].startswith(("256.0 MB", "244.1 MiB")), row


async def test_a_result_sent_as_text_and_structured_content_is_counted_once(tmp_path: Path) -> None:
    """fastmcp sends the same JSON as text and as structuredContent: the threshold applies to it
    once, so a result just under the threshold passes untouched and one just over is saved."""
    threshold, overhead = 1000, len('{"data":""}')
    just_under, just_over = threshold * CHARS_PER_TOKEN - overhead, threshold * CHARS_PER_TOKEN - overhead + 1
    async with Client(in_memory_proxy(tmp_path, threshold_tokens=threshold)) as c, Client(backend_app) as direct:
        under = await c.call_tool_mcp("padded", {"pad": just_under})
        assert sizes(under) == (threshold * CHARS_PER_TOKEN,) * 2 and tokens(under) == (threshold, threshold)
        straight = await direct.call_tool_mcp("padded", {"pad": just_under})
        assert json.dumps(wire(under), sort_keys=True) == json.dumps(wire(straight), sort_keys=True)
        over = structured(await c.call_tool("padded", {"pad": just_over}))
        assert (
            over["intercepted"] == "saved_as_dataset"
            and over["dataset"]["original_size_bytes"] == len(straight.content[0].text) + 1
        )


async def test_excluded_tools_are_never_intercepted(tmp_path: Path) -> None:
    app = in_memory_proxy(tmp_path, excluded_tools=["records", "tiny_text"])
    async with Client(app) as c:
        big = await c.call_tool_mcp("records", {"n": 3000})
        assert big.structured_content is None and len(json.loads(big.content[0].text)) == 3000
        assert (await c.call_tool("text", {"lines": 1000})).structured_content["intercepted"] == "saved_as_dataset"


async def test_several_backends_are_namespaced_and_each_named_in_its_datasets(tmp_path: Path) -> None:
    backends = [
        Backend("one", FastMCPTransport(backend_app), None),
        Backend("two", FastMCPTransport(backend_app), None),
    ]
    app = build_proxy_app(proxy_settings(tmp_path, excluded_tools=["one_text"]), backends)
    async with Client(app) as c:
        names = {t.name for t in await c.list_tools()}
        assert {"one_records", "two_records", "read-dataset-page"} <= names and "records" not in names
        body = structured(await c.call_tool("two_records", {"n": 2000}))
        assert (body["dataset"]["server"], body["dataset"]["tool"]) == ("two", "records")
        excluded = await c.call_tool_mcp("one_text", {"lines": 2000})
        assert excluded.content[0].text.startswith("INFO line 1") and len(excluded.content[0].text) > THRESHOLD * 3


async def test_retention_runs_in_the_background_at_start(tmp_path: Path) -> None:
    from ulid import ULID

    from server.proxy.dataset_store import DatasetStore

    store = DatasetStore(tmp_path / "data", retention_days=1)
    old = str(ULID.from_timestamp(ULID().timestamp - 3 * 86400))
    store.save(old, [{"a": 1}], {"tool": "t", "server": "s"})
    app = in_memory_proxy(tmp_path, cleanup_after_days=1)
    async with Client(app):
        for _ in range(100):
            if not store.day_dir(old).exists():
                break
            await asyncio.sleep(0.05)
    assert not store.day_dir(old).exists()


async def test_a_backend_that_dies_at_start_does_not_stop_the_client_connecting(tmp_path: Path) -> None:
    dead = command_backend([sys.executable, "-c", "raise SystemExit(1)"], name="dead", timeout_s=10)
    async with Client(build_proxy_app(proxy_settings(tmp_path), [dead])) as c:
        assert {t.name for t in await c.list_tools()} == {
            "analyze-with-duckdb",
            "list-saved-datasets",
            "read-dataset-page",
        }
        with pytest.raises(Exception, match="Unknown tool"):
            await c.call_tool("records", {"n": 1})


@pytest.mark.parametrize(
    "dataset_id",
    [
        "01M879WC9JA1AE61CNJBXXHH3H\n",  # `$` in a pattern matches before a final newline
        "7ZZZZZZZZZZZZZZZZZZZZZZZZZ",  # a ULID whose time is past the year 9999
        "ZZZZZZZZZZZZZZZZZZZZZZZZZZ",  # more than a ULID's 128 bits
    ],
)
async def test_ids_that_only_look_like_ulids_are_refused_as_invalid_ids(tmp_path: Path, dataset_id: str) -> None:
    """Each was an unhandled exception ("year 10889 is out of range") from the proxy's dataset
    store, which files a dataset under its id's day."""
    async with Client(in_memory_proxy(tmp_path)) as c:
        calls = [
            ("read-dataset-page", {"dataset_id": dataset_id}),
            ("analyze-with-duckdb", {"query": "SELECT 1", "dataset_id": dataset_id}),
        ]
        if dataset_id.startswith("7"):  # a view name SQL would take for a dataset's
            calls.append(("analyze-with-duckdb", {"query": f"SELECT * FROM dataset_{dataset_id}"}))
        for tool, args in calls:
            result = await c.call_tool(tool, args, raise_on_error=False)
            assert result.is_error, (tool, args)
            assert result.structured_content is not None, (tool, result.content)
            assert result.structured_content["error"]["code"] == "invalid_dataset_id", (tool, result.content)
