"""The MCP search tools through a real fastmcp Client (in memory): shapes, paging, errors."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from fastmcp import Client

from search_engine.engine import SearchEngine
from search_engine.models import SearchRequest
from server.app import build_app
from server.output import MIN_OUTPUT_TOKENS
from server.tools.page_args import SHARED, shared_parameters, with_shared
from server.tools.registry import own_tools
from server.tools.search_arguments import SearchArguments
from tests.hostile_helpers import refused_async
from tests.server_helpers import make_settings, page_matches, structured, walk


@pytest.fixture
def settings(code_tree: Path, tmp_path: Path):
    return make_settings(code_tree, tmp_path)


@pytest.fixture
async def client(settings):
    async with Client(build_app(settings)) as c:
        yield c


async def test_tools_are_listed_with_paging_guidance_and_annotations(client):
    tools = {t.name: t for t in await client.list_tools()}
    assert {"regex_search", "hybrid_search"} <= set(tools) and "semantic_search" not in tools
    for name in ("regex_search", "hybrid_search"):
        tool = tools[name]
        assert len(tool.description.encode()) < 2048
        assert "next_cursor" in tool.description and "cursor" in tool.input_schema["properties"]
        assert tool.annotations.read_only_hint is True
        assert tool.meta["anthropic/maxResultSizeChars"] == 20_000 * 4
        assert tool.output_schema["required"] == ["search", "results", "pagination", "metadata"]
    for name in ("index_status", "reindex"):
        # a status is a few hundred characters: no size hint, which tools/list would pay for
        assert tools[name].meta is None and tools[name].output_schema["required"] == ["building"]


async def test_every_listed_tool_is_one_the_server_defines_and_compacts(settings) -> None:
    """The listing transform knows the server's own tools from their registration
    (`own_tools`), not from a hand-kept list that a new tool could be missing from."""
    app = build_app(settings)
    async with Client(app) as c:
        listed = [t.name for t in await c.list_tools()]
    assert sorted(own_tools(app)) == sorted(listed) and len(listed) == 6, listed
    assert own_tools(app)[:2] == ("regex_search", "hybrid_search")


async def test_regex_walk_returns_every_match_once_in_order(client, settings, code_tree):
    matches, responses = await walk(client, "regex_search", {"pattern": r"needle \d+", "page_size": 37})
    full = SearchEngine(settings.engine_config()).search(
        SearchRequest(query=r"needle \d+", root=str(code_tree.resolve()))
    )
    assert [(m["path"], m["line"]) for m in matches] == [(m.path, m.line_start) for m in full.matches]
    assert len(matches) == 12 * 20
    first, last = responses[0], responses[-1]
    assert first["pagination"]["total_pages"] == len(responses) == 7
    assert first["pagination"]["current_page"] == 1 and last["pagination"]["current_page"] == 7
    assert first["results"]["has_more"] and not last["results"]["has_more"]
    assert last["pagination"]["next_cursor"] is None
    assert first["metadata"]["cache"] == "miss"
    assert {r["metadata"]["cache"] for r in responses[1:]} == {"hit"}
    assert first["search"] == {"query": r"needle \d+", "mode": "regex"}  # compact: no empty parameters


async def test_compact_page_groups_matches_by_file(client):
    """The default page: each path once, `{line: text}` under it; no byte offsets, language,
    type or duplicate line number; metadata without timing breakdowns or empty warnings."""
    body = structured(await client.call_tool("regex_search", {"pattern": "needle_3_[45]\\b"}))
    results = body["results"]
    assert results["files"] == {
        "pkg/mod03.py": {"11": "def needle_3_4(x):  # needle 4", "13": "def needle_3_5(x):  # needle 5"}
    }
    assert results["count"] == results["total_count"] == 2 and "search_total_count" not in results
    assert set(body["metadata"]) == {"cache", "time_ms", "freshness"}
    assert set(body["pagination"]) == {"next_cursor", "page_size", "current_page", "total_pages", "offset"}


async def test_compact_entries_carry_context_as_objects(client):
    body = structured(await client.call_tool("regex_search", {"pattern": "needle_3_4", "context_lines": 1}))
    assert body["results"]["files"] == {
        "pkg/mod03.py": {
            "11": {
                "text": "def needle_3_4(x):  # needle 4",
                "before": ["    return x + 3"],
                "after": ["    return x + 4"],
            }
        }
    }
    assert body["search"]["parameters"] == {"context_lines": 1}


async def test_full_detail_match_shape(client):
    """detail="full" keeps the seed-compatible objects, metadata and counts."""
    args = {"pattern": "needle_3_4", "context_lines": 1, "detail": "full"}
    body = structured(await client.call_tool("regex_search", args))
    (m,) = body["results"]["matches"]
    assert m["type"] == "regex_match"
    assert m["file"] == {"path": "pkg/mod03.py", "language": "python"}
    span = m["match"]["span"]
    assert span["line_start"] == span["line_end"] == m["match"]["line_number"] == 11
    assert span["byte_end"] > span["byte_start"] >= 0
    assert m["match"]["content"].startswith("def needle_3_4(x)")
    assert m["context"] == {"before": ["    return x + 3"], "after": ["    return x + 4"]}
    assert body["results"]["count"] == body["results"]["total_count"] == body["results"]["search_total_count"] == 1
    assert set(body["metadata"]) == {
        "search_time_ms",
        "index_time_ms",
        "page_time_ms",
        "cache",
        "index",
        "freshness",
        "warnings",
    }
    assert body["search"]["parameters"] == {"context_lines": 1}


async def test_snippet_length_cuts_the_text_and_zero_leaves_it_out(client):
    body = structured(await client.call_tool("regex_search", {"pattern": "needle_3_4", "snippet_length": 10}))
    content = page_matches(body)[0]["text"]
    assert len(content) == 10 and content.endswith("…")
    body = structured(await client.call_tool("regex_search", {"pattern": "needle_3_4", "snippet_length": 0}))
    assert body["results"]["files"] == {"pkg/mod03.py": {"11": None}}
    full = structured(
        await client.call_tool("regex_search", {"pattern": "needle_3_4", "snippet_length": 0, "detail": "full"})
    )
    assert "content" not in full["results"]["matches"][0]["match"]


async def test_snippets_are_cut_between_characters_not_bytes(code_tree, tmp_path):
    (code_tree / "unicode.txt").write_text("needle_ü " + "ü€😀" * 300 + "\n", encoding="utf-8")
    async with Client(build_app(make_settings(code_tree, tmp_path))) as c:
        for length in range(5, 16):
            result = await c.call_tool("regex_search", {"pattern": "needle_ü", "snippet_length": length})
            content = page_matches(structured(result))[0]["text"]
            assert len(content) == length and content.endswith("…")
            assert content[:-1] == ("needle_ü " + "ü€😀" * 300)[: length - 1]
            content.encode("utf-8")  # whole characters only: a split sequence could not encode


async def _invalid_params(client, args, tool="regex_search") -> str:
    return await refused_async(client, tool, args)


async def test_tampered_cursor_is_invalid_params(client):
    first = structured(await client.call_tool("regex_search", {"pattern": "needle", "page_size": 10}))
    cursor = first["pagination"]["next_cursor"]
    tampered = cursor[:-3] + ("AAA" if not cursor.endswith("AAA") else "BBB")
    message = await _invalid_params(client, {"cursor": tampered})
    assert "without a cursor" in message or "cursor" in message
    await _invalid_params(client, {"cursor": "not-a-cursor"})


async def test_cursor_with_other_search_params_is_refused(client):
    first = structured(await client.call_tool("regex_search", {"pattern": "needle", "page_size": 10}))
    cursor = first["pagination"]["next_cursor"]
    await _invalid_params(client, {"cursor": cursor, "pattern": "other"})
    # Re-sending the same parameters with the cursor is fine.
    again = structured(await client.call_tool("regex_search", {"cursor": cursor, "pattern": "needle"}))
    assert again["pagination"]["current_page"] == 2


async def test_a_cursor_whose_folder_was_deleted_is_refused_not_served(client, code_tree):
    """Fail closed: what can no longer be resolved cannot be shown to lie inside the roots, so
    its cursor is refused (even though its session could still serve the page)."""
    first = structured(await client.call_tool("regex_search", {"pattern": "needle", "path": "lib", "page_size": 10}))
    cursor = first["pagination"]["next_cursor"]
    shutil.rmtree(code_tree / "lib")
    message = await _invalid_params(client, {"cursor": cursor})
    assert "gone or unreadable" in message and "without a cursor" in message


async def test_bad_arguments_are_invalid_params(client):
    await _invalid_params(client, {"pattern": "x", "page_size": 10_000})
    await _invalid_params(client, {"pattern": "x", "context_lines": 11})
    await _invalid_params(client, {"pattern": "x", "page_size": "many"})
    await _invalid_params(client, {})
    await _invalid_params(client, {"pattern": "   "})
    # The page's options are checked once, by the tool's schema (the output layer trusts them):
    # the refusal names the choices, or the least size an answer's envelope needs.
    for tool, query in (("regex_search", "pattern"), ("analyze-with-duckdb", "query")):
        message = await _invalid_params(client, {query: "x", "output_mode": "yaml"}, tool)
        assert all(mode in message for mode in ("auto", "inline", "file_ref", "legacy")), message
    message = await _invalid_params(client, {"pattern": "x", "max_output_tokens": MIN_OUTPUT_TOKENS - 1})
    assert str(MIN_OUTPUT_TOKENS) in message, message


async def test_the_shared_parameters_are_declared_once_and_listed_after_each_tools_own(settings):
    """The search tools' bodies declare only their own parameters and take the shared ones as
    `**shared`; `with_shared` gives each the signature its schema is built from and its calls are
    validated by, the shared parameters last and in order. A body that cannot take them is
    refused when the tool registers."""

    async def closed(ctx, pattern=None): ...

    with pytest.raises(TypeError, match="must take the shared parameters as"):
        with_shared(shared_parameters(snippet_length=1, max_page_size=2, cursor="c"))(closed)
    app = build_app(settings)
    async with Client(app) as c:
        listed = {t.name: list(t.input_schema["properties"]) for t in await c.list_tools()}
        # Validated before the body runs: a shared argument out of its bounds is refused by name.
        message = await refused_async(c, "hybrid_search", {"query": "x", "snippet_length": 2001})
        assert "snippet_length" in message, message
    arguments = next(m for m in app.middleware if isinstance(m, SearchArguments))
    for tool in ("regex_search", "hybrid_search"):
        own = list(arguments.parameters[tool])
        assert listed[tool] == [*own, *SHARED], listed[tool]
    assert own[:2] == ["query", "mode"] and list(arguments.parameters["regex_search"])[:2] == ["pattern", "path"]


async def test_search_failures_are_actionable_tool_errors(client, tmp_path):
    result = await client.call_tool("regex_search", {"pattern": "foo(", "page_size": 5}, raise_on_error=False)
    assert result.is_error
    error = result.structured_content["error"]
    assert error["code"] == "invalid_query" and "hint" in error

    outside = await client.call_tool("regex_search", {"pattern": "x", "path": "../../"}, raise_on_error=False)
    assert outside.is_error and outside.structured_content["error"]["code"] == "invalid_path"

    missing = await client.call_tool("regex_search", {"pattern": "x", "path": "nope/"}, raise_on_error=False)
    assert missing.is_error and missing.structured_content["error"]["code"] == "invalid_path"


async def test_sub_path_and_globs(client):
    body = structured(await client.call_tool("regex_search", {"pattern": "needle", "path": "lib", "page_size": 200}))
    assert body["results"]["total_count"] == 6 * 20
    assert all(m["path"].startswith("lib/") for m in page_matches(body))
    body = structured(
        await client.call_tool(
            "regex_search", {"pattern": "needle", "include_patterns": ["mod01.py"], "page_size": 200}
        )
    )
    assert {m["path"] for m in page_matches(body)} == {"pkg/mod01.py"}


async def test_a_repeated_regex_search_sees_files_edited_in_between(client, code_tree):
    """Regex results are not versioned by an index, so a repeated first page searches again
    (an agent re-running a search to check its edit must see the edit); cursors of the first
    search keep walking their own snapshot."""
    a = structured(await client.call_tool("regex_search", {"pattern": "needle", "page_size": 10}))
    (code_tree / "lib" / "mod00.py").write_text("no more matches here\n")
    b = structured(await client.call_tool("regex_search", {"pattern": "needle", "page_size": 10}))
    assert a["metadata"]["cache"] == "miss" and b["metadata"]["cache"] == "miss"
    assert (a["results"]["total_count"], b["results"]["total_count"]) == (240, 220)
    a2 = structured(await client.call_tool("regex_search", {"cursor": a["pagination"]["next_cursor"]}))
    assert a2["metadata"]["cache"] == "hit" and a2["results"]["total_count"] == 240


async def test_cursor_survives_a_server_restart(settings):
    async with Client(build_app(settings)) as c1:
        first = structured(await c1.call_tool("regex_search", {"pattern": "needle", "page_size": 100}))
    async with Client(build_app(settings)) as c2:  # a fresh process state: empty session store
        second = structured(await c2.call_tool("regex_search", {"cursor": first["pagination"]["next_cursor"]}))
        assert second["metadata"]["cache"] == "restored"
        assert second["pagination"]["current_page"] == 2
        rest, _ = await walk(c2, "regex_search", {"cursor": second["pagination"]["next_cursor"]})
    lines = [m["line"] for m in page_matches(first) + page_matches(second) + rest]
    assert len(lines) == 240


async def test_concurrent_clients_page_independently(settings):
    app = build_app(settings)

    async def one(pattern: str) -> int:
        async with Client(app) as c:
            matches, _ = await walk(c, "regex_search", {"pattern": pattern, "page_size": 25})
            return len(matches)

    counts = await asyncio.gather(*(one(f"needle_{i}_") for i in range(8)))
    assert counts == [20] * 8


def test_response_json_is_compact_and_utf8(settings, code_tree):
    (code_tree / "uni.py").write_text("needle = 'héllo 世界'\n", encoding="utf-8")

    async def go():
        async with Client(build_app(settings)) as c:
            r = await c.call_tool("regex_search", {"pattern": "héllo"})
            legacy = await c.call_tool("regex_search", {"pattern": "héllo", "output_mode": "legacy"})
            return r.content[0].text, legacy.content[0].text

    text, legacy = asyncio.run(go())
    assert text.splitlines()[1:] == ["uni.py", "1:needle = 'héllo 世界'"]  # grep-like, UTF-8 as is
    assert "世界" in legacy and ", " not in legacy and json.loads(legacy)[0]["match"]["line_number"] == 1


async def test_a_search_cut_at_max_results_still_reports_its_true_total(code_tree, tmp_path):
    """Pages walk the kept list (bounded), but the agent learns how many there really were and
    how to reach them, on every page."""
    async with Client(build_app(make_settings(code_tree, tmp_path, search={"max_results": 30}))) as c:
        matches, responses = await walk(c, "regex_search", {"pattern": r"needle \d+", "page_size": 20})
    assert len(matches) == 30 and len(responses) == 2
    for body in responses:
        results = body["results"]
        assert (results["total_count"], results["search_total_count"], results["truncated"]) == (30, 240, True)
        assert any("found 240 matches and keeps the first 30" in w for w in body["metadata"]["warnings"])


async def test_an_uncut_search_has_no_cut_warning(client):
    body = structured(await client.call_tool("regex_search", {"pattern": r"needle \d+"}))
    results = body["results"]
    assert (results["total_count"], results.get("search_total_count", 240), results["truncated"]) == (240, 240, False)
    assert not any("search.max_results" in w for w in body["metadata"].get("warnings", []))
