"""jq_filter runs over the records the agent is shown: compact `{path, line, text}` records by
default, the full objects with detail="full" (and legacy output), and an error shows one of them.

Before (issue 37.3): the filter always ran over full objects (`.file.path`) while every page
showed `.path`, so the natural `map(select(.path | startswith("lib/")))` failed with
"startswith() requires string inputs", and nothing in the error showed the shape."""

from __future__ import annotations

import json
from typing import Any

from fastmcp import Client

from server.app import build_app
from tests.hostile_helpers import refused_async
from tests.server_helpers import make_settings, page_matches, structured, walk

#: `write_code_tree`'s defaults: 12 files (lib/ the even ones, pkg/ the odd) of 20 needles each.
TOTAL = 240


async def refused(c: Client[Any], args: dict[str, Any]) -> str:
    result = await c.call_tool("regex_search", {"pattern": "needle", **args}, raise_on_error=False)
    assert result.is_error, result
    error = structured(result)["error"]
    assert error["code"] == "invalid_jq_filter", error
    message: str = error["message"]
    return message


async def test_the_filter_sees_the_compact_records_every_page_shows(code_tree, tmp_path):
    async with Client(build_app(make_settings(code_tree, tmp_path))) as c:
        expr = 'map(select(.path | startswith("lib/")))'
        matches, responses = await walk(c, "regex_search", {"pattern": "needle", "jq_filter": expr, "page_size": 100})
        assert len(matches) == TOTAL // 2 and all(m["path"].startswith("lib/") for m in matches)
        assert responses[0]["results"]["total_count"] == TOTAL // 2
        assert responses[0]["results"]["search_total_count"] == TOTAL

        stream = '.[] | select(.line == 3 and (.text | test("needle_1_")))'
        page = structured(await c.call_tool("regex_search", {"pattern": "needle", "jq_filter": stream}))
        assert [(m["path"], m["line"]) for m in page_matches(page)] == [("pkg/mod01.py", 3)]

        ordered = 'sort_by(.path) | reverse | map(select(.text | contains("# needle 7"))) | .[:3]'
        page = structured(await c.call_tool("regex_search", {"pattern": "needle", "jq_filter": ordered}))
        assert [m["path"] for m in page_matches(page)] == ["pkg/mod11.py", "pkg/mod09.py", "pkg/mod07.py"]


async def test_the_pages_show_the_engines_matches_cut_as_asked(code_tree, tmp_path):
    """The filter sees whole text; what the pages show is the matches it kept, presented as
    the call asks (here cut to 12 characters), never values the filter wrote."""
    async with Client(build_app(make_settings(code_tree, tmp_path))) as c:
        args = {"pattern": "needle", "jq_filter": 'map(select(.text | endswith("# needle 19")))', "snippet_length": 12}
        shown = page_matches(structured(await c.call_tool("regex_search", args)))
        assert len(shown) == 12 and {m["text"] for m in shown} == {"def needle_…"}


async def test_with_detail_full_the_filter_sees_the_full_objects(code_tree, tmp_path):
    async with Client(build_app(make_settings(code_tree, tmp_path))) as c:
        expr = 'map(select(.file.path | startswith("pkg/")))'
        page = structured(await c.call_tool("regex_search", {"pattern": "needle", "jq_filter": expr, "detail": "full"}))
        assert page["results"]["total_count"] == TOTAL // 2
        assert all(m["file"]["path"].startswith("pkg/") for m in page["results"]["matches"])

        # One filter text, two shapes: two lists (and sessions), each what the filter says of its shape.
        same = "map(select(.line == 3))"
        compact = structured(await c.call_tool("regex_search", {"pattern": "needle", "jq_filter": same}))
        full = structured(await c.call_tool("regex_search", {"pattern": "needle", "jq_filter": same, "detail": "full"}))
        assert compact["results"]["total_count"] == 12 and full["results"]["total_count"] == 0
        assert full["search"]["parameters"]["jq_filter"] == same == compact["search"]["parameters"]["jq_filter"]


async def test_an_error_shows_one_record_of_the_shape_the_filter_sees(code_tree, tmp_path):
    async with Client(build_app(make_settings(code_tree, tmp_path))) as c:
        message = await refused(c, {"jq_filter": 'map(select(.file.path | startswith("lib/")))'})
        assert "startswith() requires string inputs" in message
        first = json.loads(message.split("the first is ", 1)[1])
        assert first == {"path": "lib/mod00.py", "line": 3, "text": "def needle_0_0(x):  # needle 0"}
        assert 'detail="full"' in message

        message = await refused(c, {"jq_filter": 'map(select(.path | startswith("lib/")))', "detail": "full"})
        first = json.loads(message.split("the first is ", 1)[1])
        assert first["file"]["path"] == "lib/mod00.py" and first["match"]["span"]["line_start"] == 3

        message = await refused(c, {"jq_filter": "map(.path)"})
        assert 'a string ("lib/mod00.py"), not a match record' in message and "the first is {" in message


async def test_a_cursor_keeps_its_filter_and_shape(code_tree, tmp_path):
    async with Client(build_app(make_settings(code_tree, tmp_path))) as c:
        expr = 'map(select(.path | startswith("pkg/")))'
        first = structured(await c.call_tool("regex_search", {"pattern": "needle", "jq_filter": expr}))
        cursor = first["pagination"]["next_cursor"]
        # The filter re-sent with its cursor is the cursor's; detail is presentation, page by page.
        again = {"cursor": cursor, "jq_filter": expr, "detail": "full"}
        second = structured(await c.call_tool("regex_search", again))
        assert second["results"]["total_count"] == TOTAL // 2 and second["pagination"]["offset"] == 50
        assert all(m["file"]["path"].startswith("pkg/") for m in second["results"]["matches"])
        other = await refused_async(c, "regex_search", {"cursor": cursor, "jq_filter": "map(select(.file.path))"})
        assert "`jq_filter` sent with this cursor differs" in other


async def test_a_nul_character_is_refused(code_tree, tmp_path):
    """libjq reads the filter as a C string: what follows a NUL was dropped unseen."""
    async with Client(build_app(make_settings(code_tree, tmp_path))) as c:
        assert "NUL" in await refused(c, {"jq_filter": "map(select(.line == 3))\x00 | .[:1]"})
        assert "NUL" in await refused(c, {"jq_filter": "\x00full\x00map(.)"})
