"""What a hostile or broken backend can make the proxy do. Each test drives the real proxy app
(`build_proxy_app`) in front of a real stdio backend subprocess: a hand-written MCP server
(RAW_BACKEND below) that answers with exact bytes, so it can send what a fastmcp server never
would (lone surrogate escapes, over-deep JSON, a 5 MB envelope). Found by an audit; the
ones still open are in docs/reliability.md, "Known limits"."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from fastmcp import Client

from server.proxy import build_proxy_app, command_backend
from tests.proxy_helpers import proxy_settings
from tests.server_helpers import structured

pytestmark = pytest.mark.asyncio(loop_scope="module")
MB = 1 << 20
#: Each backend call fails after this long (the proxy's `call_timeout_s`, 300 s by default).
CALL_TIMEOUT_S = 10

#: A stdio MCP server speaking raw JSON lines: tools/call answers `RESULTS[name](args)`, the
#: raw JSON text of the result (a str may hold lone surrogates; they are written as-is).
RAW_BACKEND = r"""
import json, sys
out = sys.stdout.buffer
def send(b):
    out.write(b + b"\n"); out.flush()
def text_result(text):
    return json.dumps({"content": [{"type": "text", "text": text}]})
def records(rows):
    return text_result(json.dumps(rows))
RESULTS = {
    # {"rows": [...]} plus a 5 MB member: the envelope around the records
    "big_envelope": lambda a: json.dumps(
        {"content": [{"type": "text", "text": "see structured"}],
         "structuredContent": {"rows": [{"a": i} for i in range(200)], "blob": "x" * (5 * 2**20)}}),
    # 3 records of 70,000 fields (4.8 MB)
    "wide": lambda a: records([{"field_%06d" % j: j for j in range(70000)} for _ in range(3)]),
    # a lone surrogate escape: valid JSON syntax, which Python's json.dumps writes for such text
    "lone_surrogate": lambda a: '{"content":[{"type":"text","text":"name \\udc80 here"}]}',
    # structuredContent nested 300 levels (the pydantic JSON parser stops at ~255)
    "deep_structured": lambda a: '{"content":[{"type":"text","text":"deep"}],"structuredContent":{"x":'
        + "[" * 300 + "]" * 300 + "}}",
    # 3,000 lines, each holding a form feed and a U+2028 (as source files and logs can)
    "form_feeds": lambda a: text_result("".join("line %d\fpage\u2028tail\n" % i for i in range(3000))),
    # a flag that is 1 in half the records and true in the other half
    "bool_and_int": lambda a: records([{"flag": [1, True][i % 2], "pad": "p" * 30} for i in range(2000)]),
    # keys that differ only in case, and an empty key
    "case_keys": lambda a: records(
        [{"id": i % 3, "ID": "X%d" % (i % 2), "": "e", "n": i, "pad": "p" * 30} for i in range(2000)]),
    # 5,000 records keyed `id`, one of which also has `ID`: only a full pass over the keys sees it
    "one_clash": lambda a: records(
        [{"id": i, "pad": "p" * 30} | ({"ID": -1} if i == 2777 else {}) for i in range(5000)]),
    # a result that is not a CallToolResult
    "malformed": lambda a: '{"content":5}',
    "small": lambda a: text_result("hello"),
}
# two tools whose definitions no protocol version accepts, listed among the good ones
BAD_TOOLS = [{"name": "bad_required", "inputSchema": {"type": "object", "required": "x"}}, {"name": "no_schema"}]
TOOLS = json.dumps([{"name": n, "inputSchema": {"type": "object"}} for n in RESULTS][:3] + BAD_TOOLS
                   + [{"name": n, "inputSchema": {"type": "object"}} for n in RESULTS][3:]).encode()
for line in sys.stdin.buffer:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    mid = json.dumps(msg["id"]).encode()
    method = msg.get("method")
    if method == "initialize":
        send(b'{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},'
             b'"serverInfo":{"name":"raw","version":"1"}}}' % mid)
    elif method == "tools/list":
        send(b'{"jsonrpc":"2.0","id":%s,"result":{"tools":%s}}' % (mid, TOOLS))
    elif method == "tools/call":
        body = RESULTS[msg["params"]["name"]](msg["params"].get("arguments") or {})
        send(b'{"jsonrpc":"2.0","id":%s,"result":%s}' % (mid, body.encode("utf-8", "surrogatepass")))
    elif method == "ping":
        send(b'{"jsonrpc":"2.0","id":%s,"result":{}}' % mid)
    else:
        send(b'{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"unknown method"}}' % mid)
"""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client[Any]]:
    tmp = tmp_path_factory.mktemp("audit-proxy")
    script = tmp / "raw_backend.py"
    script.write_text(RAW_BACKEND)
    backend = command_backend([sys.executable, str(script)], name="raw", timeout_s=CALL_TIMEOUT_S)
    async with Client(build_proxy_app(proxy_settings(tmp), [backend]), timeout=60) as c:
        assert (await c.call_tool("small", {})).content[0].text == "hello"
        yield c


def text_of(result: Any) -> str:
    """The text of a result's first content block ("" without one)."""
    return str(result.content[0].text) if result.content else ""


async def saved(client: Client[Any], tool: str) -> dict[str, Any]:
    body = structured(await client.call_tool(tool, {}))
    assert body["intercepted"] == "saved_as_dataset", body
    dataset: dict[str, Any] = body["dataset"]
    return dataset | {"example_sql": body["example_sql"]}


async def sql(client: Client[Any], query: str) -> Any:
    """The rows of `query`, or the error text when it fails."""
    result = await client.call_tool_mcp("analyze-with-duckdb", {"query": query})
    body = json.loads(text_of(result))
    return body["error"] if result.is_error else body["results"]["rows"]


# -- the tool list ---------------------------------------------------------------------------


async def test_a_malformed_tool_definition_hides_only_that_tool(
    client: Client[Any], caplog: pytest.LogCaptureFixture
) -> None:
    """Before: the SDK validated the backend's tool list whole, so one tool whose input schema
    had `required: "x"` (or no schema) hid all of the backend's tools, with only a warning in
    the log. Now the two bad tools are dropped, each named in the log, and the rest listed."""
    with caplog.at_level("WARNING"):
        listed = {tool.name for tool in await client.list_tools()}
    assert {"small", "wide", "case_keys", "malformed"} <= listed, listed
    assert not {"bad_required", "no_schema"} & listed, listed
    dropped = [r.getMessage() for r in caplog.records if "dropped the server's tool" in r.getMessage()]
    assert any("'bad_required'" in m and "inputSchema.required" in m for m in dropped), dropped
    assert any("'no_schema'" in m and "inputSchema" in m for m in dropped), dropped


# -- the metadata file ----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("tool", ["big_envelope", "wide"])
async def test_a_saved_dataset_can_be_queried_right_after_it_is_saved(client: Client[Any], tool: str) -> None:
    """Before: the metadata file held the whole envelope, every field name and three whole
    sample records (5-6 MB here), the store reads back at most 4 MiB of it, so the dataset
    was "not found" the moment it was saved. What the backend controls is now cut to 1 MiB."""
    ds = await saved(client, tool)
    size = Path(ds["metadata_path"]).stat().st_size
    assert size <= 1 << 20
    # Found by the dataset tools (not SQL: DuckDB 1.x, the newest on Python 3.10, takes over
    # the SQL timeout just to read 70,000 columns)
    listed = structured(await client.call_tool("list-saved-datasets", {"filter": {"tool": tool}}))
    assert ds["id"] in {d["id"] for d in listed["datasets"]}
    page = structured(await client.call_tool("read-dataset-page", {"dataset_id": ds["id"], "page_size": 1}))
    assert page["results"]["total_count"] == ds["record_count"], page["results"]
    if tool == "big_envelope":
        rows = await sql(client, f"SELECT count(*) AS n FROM {ds['table']}")
        assert rows == [{"n": ds["record_count"]}], f"metadata file {size:,} bytes; the query answered {rows}"
    metadata = json.loads(Path(ds["metadata_path"]).read_text())
    assert metadata["id"] == ds["id"] and metadata["record_count"] == ds["record_count"]


# -- replies the proxy cannot parse ----------------------------------------------------------


@pytest.mark.parametrize("tool", ["lone_surrogate", "deep_structured"])
async def test_a_reply_that_does_not_parse_fails_its_call_at_once(client: Client[Any], tool: str) -> None:
    """The backend answered at once, and the reply's id is readable. Before: the SDK only
    logged that the reply did not parse, and the call waited out call_timeout_s (300 s by
    default). Now it fails at once, saying the reply could not be read."""
    started = time.monotonic()
    result = await client.call_tool_mcp(tool, {})
    elapsed = time.monotonic() - started
    text = text_of(result)
    assert result.is_error and "could not read the server's response" in text, text
    assert elapsed < CALL_TIMEOUT_S / 2, f"answered after {elapsed:.1f} s: {text}"


# -- records ---------------------------------------------------------------------------------


async def test_text_lines_are_split_only_at_line_breaks(client: Client[Any]) -> None:
    """Before: str.splitlines() also split at form feeds, U+2028 and other separators, so line
    N of the dataset was not line N of the backend's text."""
    ds = await saved(client, "form_feeds")
    rows = await sql(client, f"SELECT line, text FROM {ds['table']} WHERE line = 2")
    assert ds["record_count"] == 3000 and rows == [{"line": 2, "text": "line 1\fpage\u2028tail"}], (
        ds["record_count"],
        rows,
    )


async def test_distinct_values_tell_true_from_1(client: Client[Any]) -> None:
    """Before: Python counts True as 1, so the profile said one value, 1, 2,000 times."""
    ds = await saved(client, "bool_and_int")
    rows = await sql(client, f"SELECT flag::VARCHAR AS flag, count(*) AS n FROM {ds['table']} GROUP BY 1")
    in_sql = Counter({r["flag"]: r["n"] for r in rows})
    assert in_sql == Counter({"1": 1000, "true": 1000})
    assert ds["distinct_values"]["flag"] == [{"value": 1, "count": 1000}, {"value": True, "count": 1000}], ds[
        "distinct_values"
    ]


async def test_keys_that_differ_only_in_case_are_read_as_json_not_as_each_other(client: Client[Any]) -> None:
    """Before: DuckDB, whose names ignore case, read `ID` as a column `ID_1`, so the example
    SQL over `"ID"` counted the values of `id` (0, 1, 2) under the name `ID`, and the empty
    key made the dataset one JSON column the answer did not mention. Now such records are one
    JSON column, `value`, the answer says so, and every example query runs and reads the key
    it names."""
    ds = await saved(client, "case_keys")
    assert "JSON Pointer" in ds["sql_columns"] and '"id", "ID", ""' in ds["sql_columns"], ds["sql_columns"]
    answers = [await sql(client, query) for query in ds["example_sql"]]
    assert all(isinstance(rows, list) for rows in answers), list(zip(ds["example_sql"], answers, strict=True))
    by_query = dict(zip(ds["example_sql"], answers, strict=True))
    [(per_id, id_rows)] = [(q, r) for q, r in by_query.items() if 'AS "id"' in q]
    [(per_upper, upper_rows)] = [(q, r) for q, r in by_query.items() if 'AS "ID"' in q]
    assert {r["id"] for r in id_rows} == {"0", "1", "2"}, (per_id, id_rows)
    assert {r["ID"]: r["n"] for r in upper_rows} == {"X0": 1000, "X1": 1000}, (per_upper, upper_rows)
    [stats] = [r for q, r in by_query.items() if q.startswith("SELECT min(")]
    assert stats == [{"min": 0.0, "max": 2.0, "avg": 0.9995}], stats  # `id`, the first numeric key
    keys = await sql(client, f"SELECT DISTINCT unnest(json_keys(value)) AS key FROM {ds['table']} ORDER BY 1")
    assert [r["key"] for r in keys] == ["", "ID", "id", "n", "pad"], keys


async def test_one_record_with_a_clashing_key_outside_the_sample_is_still_seen(client: Client[Any]) -> None:
    """The profile's types come from a sample of 100 records; whether keys can be columns is
    decided over all 5,000, so the one record holding `ID` beside `id` is not missed (the
    typed view would have read that `ID` back as its `id`)."""
    ds = await saved(client, "one_clash")
    assert '"id", "ID"' in ds["sql_columns"], ds
    rows = await sql(
        client,
        f"SELECT value->>'/ID' AS upper, value->>'/id' AS lower FROM {ds['table']} WHERE value->>'/ID' IS NOT NULL",
    )
    assert rows == [{"upper": "-1", "lower": "2777"}], rows
    assert await sql(client, f"SELECT count(*) AS n FROM {ds['table']}") == [{"n": 5000}]


async def test_a_malformed_result_is_the_backends_error_not_the_clients_arguments(client: Client[Any]) -> None:
    """Before: fastmcp answered -32602 "Invalid request parameters", telling the agent to fix
    arguments that were fine. Now an isError result names the backend and what was wrong."""
    result = await client.call_tool_mcp("malformed", {})
    assert result.is_error
    error = json.loads(text_of(result))["error"]
    assert error["code"] == "backend_result_invalid", error
    assert "raw's tool malformed" in error["message"] and "content" in error["message"]
    assert "not your arguments" in error["hint"]
