"""Hostile results through a real `codepager proxy` process in front of the real test backend
(harness/proxy_backend.py, its stdio subprocess): a JSON result nested 5,000 levels deep is saved
intact (or passes through intact when small), a 40 MB reply line is answered in seconds and
leaves the backend's channel free for the next call, a reply over the proxy's limit fails its
call with an error saying so, the proxy's analyze-with-duckdb streams a 300 MB SELECT with
bounded memory, and a 20 MiB error, image or `_meta` (issue 36.7) never reaches the client whole."""

from __future__ import annotations

import base64
import hashlib
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from harness.patched import patched_codepager_cmd
from harness.proxy_backend import BACKEND_SCRIPT as BACKEND
from harness.proxy_backend import image_bytes
from server.output import MAX_RESULT_BYTES
from server.sql.datasets import STREAMS
from tests.hostile_helpers import HUGE_SELECT, MB, WIDE_CHARS, WIDE_ROWS
from tests.server_helpers import peak_rss, pid_with_args, reset_peak_rss, serve_env, structured

pytestmark = pytest.mark.asyncio(loop_scope="module")
THRESHOLD_TOKENS = 2000
#: Backend calls fail after this long: a reply the proxy takes longer to read is lost to it.
CALL_TIMEOUT_S = 20
MAX_BACKEND_MESSAGE = 48 * MB
#: The key of a result's _meta that says how much of the backend's the proxy left out.
META_LEFT_OUT = "codepager/meta_left_out"


def nested(depth: int) -> str:
    """What the backend's `deep` tool returns."""
    return '[{"nested":' + "[" * depth + '"bottom"' + "]" * depth + '},{"id":2}]'


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def proxy(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Client[Any], int]]:
    tmp = tmp_path_factory.mktemp("hostile-proxy")
    cmd, args = patched_codepager_cmd({"server.proxy.backends.MAX_BACKEND_REPLY_BYTES": MAX_BACKEND_MESSAGE})
    argv = [
        *args,
        "proxy",
        "--data-dir",
        str(tmp / "data"),
        "--threshold-tokens",
        str(THRESHOLD_TOKENS),
        "--call-timeout",
        str(CALL_TIMEOUT_S),
        "--",
        sys.executable,
        BACKEND,
    ]
    env = serve_env(tmp)
    async with Client(StdioTransport(cmd, argv, env=env), timeout=120, init_timeout=120) as client:
        assert (await client.call_tool("small", {})).content[0].text == "hello world"
        yield client, pid_with_args("proxy", str(tmp / "data"))


@pytest.mark.slow
async def test_a_result_nested_5000_deep_is_saved_intact(proxy) -> None:
    client, _ = proxy
    body = structured(await client.call_tool("deep", {"depth": 5000}))
    ds = body["dataset"]
    assert body["intercepted"] == "saved_as_dataset" and ds["format"] == "text_lines" and ds["record_count"] == 1
    assert [json.loads(line) for line in Path(ds["data_path"]).read_text().splitlines()] == [
        {"line": 1, "text": nested(5000)}
    ]
    sql = f"SELECT md5(text) AS digest FROM {ds['table']}"
    rows = structured(await client.call_tool("analyze-with-duckdb", {"query": sql}))["results"]["rows"]
    assert rows == [{"digest": hashlib.md5(nested(5000).encode()).hexdigest()}]


@pytest.mark.slow
async def test_a_small_deep_result_passes_through_intact(proxy) -> None:
    client, _ = proxy
    result = await client.call_tool_mcp("deep", {"depth": 1000})
    assert not result.is_error and result.content[0].text == nested(1000)


@pytest.mark.slow
async def test_a_40_mb_reply_is_answered_and_the_next_call_is_not_kept_waiting(proxy) -> None:
    """Before, the SDK's reader re-split its whole buffer on every read: a 50 MB line took 54 s
    of CPU, so this reply timed out and the next call waited behind it."""
    client, _ = proxy
    started = time.monotonic()
    body = structured(await client.call_tool("long_text", {"mb": 40}))
    big_s = time.monotonic() - started
    ds = body["dataset"]
    assert body["intercepted"] == "saved_as_dataset" and ds["record_count"] == 1, body
    sql = f"SELECT length(text) AS n, right(text, 4) AS tail FROM {ds['table']}"
    rows = structured(await client.call_tool("analyze-with-duckdb", {"query": sql}))["results"]["rows"]
    assert rows == [{"n": 40 * MB + 4, "tail": " END"}]
    started = time.monotonic()
    assert (await client.call_tool("small", {"name": "next"})).content[0].text == "hello next"
    small_s = time.monotonic() - started
    assert small_s < 5, f"the next call took {small_s:.1f} s (the 40 MB one {big_s:.1f} s)"


@pytest.mark.slow
async def test_a_reply_over_the_limit_fails_its_call_and_the_next_call_works(proxy) -> None:
    client, _ = proxy
    result = await client.call_tool_mcp("long_text", {"mb": 50})
    assert result.is_error
    message = result.content[0].text
    assert f"over this client's limit of {MAX_BACKEND_MESSAGE} bytes" in message, message
    assert "the most codepager proxy reads of one backend reply" in message, "the error says whose limit it is"
    assert (await client.call_tool("small", {"name": "after"})).content[0].text == "hello after"


@pytest.mark.slow
async def test_the_proxys_sql_streams_a_300_mb_select_with_bounded_memory(proxy) -> None:
    client, pid = proxy
    before = reset_peak_rss(pid)
    body = structured(await client.call_tool("analyze-with-duckdb", {"query": HUGE_SELECT}))
    growth = peak_rss(pid) - before
    # The proxy's DuckDB runs two threads (proxy.sql.threads), each with a 2,048-row vector of
    # 10 KB rows in flight: measured 120-158 MB here, against 1,262 MB before rows were streamed.
    # DuckDB 1.x (Python 3.10) cannot stream: the result is spooled into a DuckDB table, which
    # proxy.sql.memory_limit (1GB) holds before it spills (+326 MB measured there).
    bound = 200 * MB if STREAMS else 1024 * MB + 200 * MB
    assert growth < bound, f"peak RSS grew by {growth / MB:.0f} MB for a {WIDE_ROWS * WIDE_CHARS / MB:.0f} MB result"
    results, warnings = body["results"], body["metadata"]["warnings"]
    assert results["mode"] == "file_ref" and results["truncated"] is True and 0 < results["count"] < WIDE_ROWS
    assert any(f"reached {MAX_RESULT_BYTES:,} bytes, the most one result keeps" in w for w in warnings), warnings


def wire_bytes(result: Any) -> int:
    """The size of a result as the client received it."""
    return len(json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True)))


@pytest.mark.slow
async def test_a_20_mb_error_reaches_the_client_clipped(proxy) -> None:
    """Before: the whole 20 MiB passed through (an error was never measured), into the agent's
    context; the proxy's RSS grew by ~190 MB."""
    client, _ = proxy
    result = await client.call_tool_mcp("huge_error", {"mb": 20})
    assert result.is_error and wire_bytes(result) < 5_000, wire_bytes(result)
    (block,) = result.content
    assert block.text.startswith("e" * 1000) and "cut" in block.text and " END" not in block.text
    assert (await client.call_tool("small", {"name": "after"})).content[0].text == "hello after"


@pytest.mark.slow
async def test_a_20_mb_image_is_saved_as_a_dataset_of_its_blocks(proxy) -> None:
    """Before: a result holding an image passed through whole, 27 MB of base64, however large:
    only text could be turned into records. Now its blocks are the records of a dataset, the
    image's bytes intact in data_path, and the answer is within the threshold."""
    client, _ = proxy
    result = await client.call_tool_mcp("image", {"mb": 20})
    assert not result.is_error and wire_bytes(result) < 8 * THRESHOLD_TOKENS, wire_bytes(result)  # 4 chars a token
    body = result.structured_content
    ds = body["dataset"]
    assert body["intercepted"] == "saved_as_dataset" and ds["records_from"] == "content" and ds["record_count"] == 2
    text, picture = (json.loads(line) for line in Path(ds["data_path"]).read_text().splitlines())
    assert text == {"block": 0, "type": "text", "text": "a picture"}
    assert picture["block"] == 1 and picture["mimeType"] == "image/png"
    assert base64.b64decode(picture["data"]) == image_bytes(20)
    sql = f"SELECT block, type, length(data) AS n FROM {ds['table']} WHERE type = 'image'"
    rows = structured(await client.call_tool("analyze-with-duckdb", {"query": sql}))["results"]["rows"]
    assert rows == [{"block": 1, "type": "image", "n": len(picture["data"])}]


@pytest.mark.slow
async def test_a_20_mb_meta_on_a_small_result_is_left_out_and_said(proxy) -> None:
    """Before: 20 MiB in the result's _meta and 20 MiB in its block's reached the client whole
    (no size counted _meta). Now _meta passes while all of it fits in 64 KiB, and the result's
    own _meta says how much was left out; the content is untouched."""
    client, _ = proxy
    result = await client.call_tool_mcp("big_meta", {"mb": 20})
    assert not result.is_error and wire_bytes(result) < 5_000, wire_bytes(result)
    assert result.content[0].text == "small" and result.content[0].meta is None
    left_out, _, said = result.meta[META_LEFT_OUT].partition(" bytes of the backend's _meta")
    assert said and int(left_out.replace(",", "")) > 2 * 20 * MB, result.meta
    # a small _meta still passes through exactly
    small = await client.call_tool_mcp("small", {})
    assert small.meta["backend"] == "proxy-test-backend" and META_LEFT_OUT not in small.meta
