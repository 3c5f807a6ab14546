"""The output layer as agents meet it through the search tools: modes, lossless cuts, offloaded
files read back over MCP, stats, jq_filter, SQL and cleanup."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fastmcp import Client
from mcp import MCPError
from mcp_types import INVALID_PARAMS

import server
from server.app import build_app
from server.output import estimate_tokens
from server.output.descriptor import READ_WINDOW_BYTES
from tests.hostile_helpers import refused_async
from tests.jq_recipes import run_recipe
from tests.server_helpers import make_settings, page_matches, structured, walk


@pytest.fixture
def wide_tree(tmp_path: Path) -> Path:
    """300 matches with ~300-char lines: about 25k tokens over the whole list."""
    root = tmp_path / "wide"
    root.mkdir()
    for i in range(6):
        body = "\n".join(f"hit_{i}_{j} = '{'x' * 280}'" for j in range(50))
        (root / f"f{i}.py").write_text(body + "\n")
    return root


def app_for(root: Path, tmp: Path, max_tokens: int = 4000):
    return build_app(make_settings(root, tmp, offload={"max_tokens": max_tokens}))


def ids(matches):
    return [(m["path"], m["line"]) for m in matches]


async def test_auto_offloads_a_page_over_the_ceiling_and_the_file_reads_back(wide_tree, tmp_path):
    async with Client(app_for(wide_tree, tmp_path)) as c:
        small = structured(await c.call_tool("regex_search", {"pattern": "hit_0_1\\b"}))
        assert small["results"]["mode"] == "inline"

        result = await c.call_tool("regex_search", {"pattern": "hit_", "page_size": 100})
        body = structured(result)
        assert body["results"]["mode"] == "file_ref" and body["results"]["count"] == 100
        ref = body["results"]["file_ref"]
        assert len(result.content[0].text) < 4000 * 4  # the descriptor itself fits the ceiling
        link = result.content[1]
        assert link.type == "resource_link" and link.uri == ref["uri"]

        path = Path(ref["path"])
        lines = path.read_text().splitlines()
        assert json.loads(lines[0])["type"] == "codepager_header" and len(lines) == 101
        assert ref["line_count"] == 101 and ref["size_bytes"] == path.stat().st_size
        assert oct(path.stat().st_mode & 0o777) == "0o600"

        whole = await c.read_resource(ref["uri"])
        assert whole[0].text.splitlines() == lines
        part = await c.read_resource(f"{ref['uri']}/lines/2-3")
        assert [json.loads(x) for x in part[0].text.splitlines()] == [json.loads(x) for x in lines[1:3]]

        # The first recipe (the header) runs against the real file, its jq part on libjq: the
        # recipes read the whole result list, the dataset the answer names.
        header = json.loads(run_recipe(ref["jq_recipes"][0]["command"]))
        assert header["type"] == "codepager_header" and header["count"] == ref["dataset"]["rows"] == 300

        # next_cursor still pages on, and nothing is lost across file_ref and inline pages.
        first_ids = ids([json.loads(x) for x in lines[1:]])
        rest, _ = await walk(c, "regex_search", {"cursor": body["pagination"]["next_cursor"]})
        everything = first_ids + ids(rest)
        assert len(everything) == len(set(everything)) == 300


@pytest.mark.parametrize(
    ("suffix", "says"),
    [
        ("/lines/0-5", "1-based start <= end"),
        ("/lines/5-2", "1-based start <= end"),
        ("/lines/900-950", "past the end"),
        ("/lines/abc-2", "invalid line number 'abc'"),
        ("/lines/+1-+2", "invalid line number '+1'"),
        ("/lines/1-" + "9" * 5000, None),  # an end past any file reads to the end
        ("/lines/" + "9" * 30 + "-" + "9" * 30, "past the end"),
    ],
)
async def test_bad_line_ranges_are_invalid_params_that_say_what_to_send(wide_tree, tmp_path, suffix, says):
    """Each was an internal error (-32603), some quoting Python ("invalid literal for int()",
    "Stop argument for islice()"): an agent could not tell its own mistake from a server fault."""
    async with Client(app_for(wide_tree, tmp_path)) as c:
        ref = structured(await c.call_tool("regex_search", {"pattern": "hit_", "output_mode": "file_ref"}))
        uri = ref["results"]["file_ref"]["uri"]
        if says is None:
            whole = await c.read_resource(uri)
            assert (await c.read_resource(uri + suffix))[0].text == whole[0].text
            return
        with pytest.raises(MCPError) as refused:
            await c.read_resource(uri + suffix)
        assert refused.value.error.code == INVALID_PARAMS and says in refused.value.error.message


@pytest.mark.parametrize("uri", ["codepager://results/01ARZ3NDEKTSV4RRFFQ69G5FAV", "codepager://results/not-an-id"])
async def test_unknown_and_malformed_result_ids_are_invalid_params(wide_tree, tmp_path, uri):
    async with Client(app_for(wide_tree, tmp_path)) as c:
        for target in (uri, uri + "/lines/1-2"):
            with pytest.raises(MCPError) as refused:
                await c.read_resource(target)
            error = refused.value.error
            assert error.code == INVALID_PARAMS
            assert "run the search again" in error.message or "26-character id" in error.message, error.message


async def test_bad_arguments_name_every_problem(wide_tree, tmp_path):
    """A union argument (list-saved-datasets' `filter`: text or an object) fails once per
    branch; the message said only that an object is not a string, and never why the object
    was refused."""
    async with Client(app_for(wide_tree, tmp_path)) as c:
        message = await refused_async(c, "list-saved-datasets", {"filter": {"date_from": "garbage"}})
        assert "filter.DatasetFilter.date_from: 'garbage' is not an ISO date like 2025-01-31" in message
        assert "[type=" not in message and "validation error for" not in message


async def test_bad_arguments_by_the_thousand_make_a_short_message(wide_tree, tmp_path):
    """Each bad item of a list is an error of its own: 5,000 of them (a 20 KB call) made a
    270 KB message, all of it for the agent's context. (A list has at most 1,000 items now.)"""
    async with Client(app_for(wide_tree, tmp_path)) as c:
        message = await refused_async(c, "regex_search", {"pattern": "x", "include_patterns": [1] * 1000})
        assert "include_patterns.9: Input should be a valid string; and 990 more" in message
        assert len(message) < 1000, len(message)


async def test_a_file_refs_guidance_leads_with_a_line_window_of_a_readable_size(wide_tree, tmp_path):
    """Issue 37.8: reading codepager://results/ID returned 198,669 characters in one answer, the
    whole file the guidance named first. It now leads with jq and a line range of about
    READ_WINDOW_BYTES, and names the whole file last."""
    async with Client(app_for(wide_tree, tmp_path)) as c:
        args = {"pattern": "hit_", "page_size": 200, "output_mode": "file_ref"}
        ref = structured(await c.call_tool("regex_search", args))["results"]["file_ref"]
        assert ref["size_bytes"] > 3 * READ_WINDOW_BYTES
        guidance = ref["guidance"]
        found = re.search(r"codepager://results/\w+/lines/2-(\d+)", guidance)
        assert found is not None, guidance
        whole = guidance.index(f"{ref['uri']} is the whole file")
        assert guidance.index("jq") < found.start() < whole, guidance
        window = (await c.read_resource(found[0]))[0].text
        lines = window.splitlines()
        assert len(lines) == int(found[1]) - 1 and all(json.loads(line)["path"] for line in lines)
        assert READ_WINDOW_BYTES * 0.8 < len(window.encode()) <= READ_WINDOW_BYTES, len(window)


async def test_inline_mode_cuts_losslessly(wide_tree, tmp_path):
    async with Client(app_for(wide_tree, tmp_path)) as c:
        pages, cursor = [], None
        args = {"pattern": "hit_", "page_size": 100, "output_mode": "inline"}
        while True:
            result = await c.call_tool("regex_search", {"cursor": cursor, "output_mode": "inline"} if cursor else args)
            body = structured(result)
            assert body["results"]["mode"] == "inline"
            assert estimate_tokens(result.content[0].text) <= 4000
            pages.append(body)
            cursor = body["pagination"]["next_cursor"]
            if cursor is None:
                break
        cut = [p for p in pages if p["results"]["count"] < 100 and p["pagination"]["next_cursor"]]
        assert cut and all(p["results"]["truncated"] for p in cut)
        # A cut page with a next cursor never claims to be the last page.
        assert all(p["pagination"]["total_pages"] > p["pagination"]["current_page"] for p in cut)
        assert any("cut" in w for w in cut[0]["metadata"]["warnings"])
        got = ids([m for p in pages for m in page_matches(p)])
        assert len(got) == len(set(got)) == 300


async def test_max_output_tokens_and_legacy_and_file_ref_modes(wide_tree, tmp_path):
    async with Client(app_for(wide_tree, tmp_path, max_tokens=20_000)) as c:
        result = await c.call_tool("regex_search", {"pattern": "hit_", "max_output_tokens": 1000})
        body = structured(result)
        assert 0 < body["results"]["count"] < 50 and estimate_tokens(result.content[0].text) <= 1000

        legacy = await c.call_tool("regex_search", {"pattern": "hit_1_", "output_mode": "legacy", "page_size": 5})
        array = json.loads(legacy.content[0].text)
        assert isinstance(array, list) and len(array) == 5 and array[0]["type"] == "regex_match"
        # structuredContent (which the declared outputSchema requires) is the inline page of the same records
        assert legacy.structured_content["results"]["matches"] == array

        forced = structured(await c.call_tool("regex_search", {"pattern": "hit_1_1\\b", "output_mode": "file_ref"}))
        assert forced["results"]["mode"] == "file_ref" and forced["results"]["count"] == 1


async def test_stats_only_covers_the_whole_search(wide_tree, tmp_path):
    async with Client(app_for(wide_tree, tmp_path)) as c:
        body = structured(await c.call_tool("regex_search", {"pattern": "hit_", "stats": "only", "page_size": 10}))
        stats = body["results"]["stats"]
        assert body["results"]["total_count"] == 300
        assert json.dumps(stats).count("f0.py") >= 1 and "matches" not in body["results"]
        both = structured(await c.call_tool("regex_search", {"pattern": "hit_", "stats": "first", "page_size": 10}))
        assert both["results"]["stats"] and both["results"]["count"] == 10


async def test_jq_filter_gets_its_own_session_and_refuses_escapes(code_tree, tmp_path):
    async with Client(build_app(make_settings(code_tree, tmp_path))) as c:
        expr = 'map(select(.path | startswith("lib/")))'
        matches, responses = await walk(c, "regex_search", {"pattern": "needle", "jq_filter": expr, "page_size": 50})
        assert len(matches) == 120 and all(m["path"].startswith("lib/") for m in matches)
        assert responses[0]["search"]["parameters"]["jq_filter"] == expr

        for bad in ("$ENV", "env.HOME", "input_filename", "map(.path)", "map(("):
            r = await c.call_tool("regex_search", {"pattern": "needle", "jq_filter": bad}, raise_on_error=False)
            assert r.is_error and r.structured_content["error"]["code"] == "invalid_jq_filter", bad


# A value nested ~1,000 deep: Python <= 3.12 cannot parse it back (RecursionError), 3.13 can and
# then finds it is no match record. Either way it is refused, saying why.
NESTED = "nested too deeply|an array, not a match record"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("expr", "says"),
    [
        # before: one match became a session of 150,000 (search.max_results is 10,000), +230 MB
        (".[0] as $m | [range(150000) | $m]", "may only filter, sort or slice"),
        ("[.[], .[], .[]]", "may only filter, sort or slice"),  # within the byte slack: counted
        # before: an unmapped RecursionError (json.loads in the server, whose stack is deeper)
        ("[range(990)] | reduce .[] as $x (1; [.])", NESTED),
        # before: the worker's traceback, naming our files and interpreter, went to the client
        ("[range(2000)] | reduce .[] as $x (1; [.])", NESTED),
    ],
)
async def test_a_jq_filter_that_grows_or_nests_its_output_is_refused_clearly(code_tree, tmp_path, expr, says):
    # What is asserted is the refusal, not the time: a jq_timeout under a loaded machine's
    # 150,000-element output is not what this test is about.
    settings = make_settings(code_tree, tmp_path, jq={"timeout_s": 120})
    async with Client(build_app(settings)) as c:
        r = await c.call_tool("regex_search", {"pattern": "needle", "jq_filter": expr}, raise_on_error=False)
        assert r.is_error
        error = structured(r)["error"]
        assert error["code"] == "invalid_jq_filter" and re.search(says, error["message"]), error
        # nothing of the server's own code: no traceback, no file of it (the example record names the tree's)
        assert "Traceback" not in error["message"] and str(Path(server.__file__).parent) not in error["message"]


_COMPACT_RETYPES = [
    ("map(.path = 123)", "`.path` is a number; in the match records it is a string"),
    ("map(.text = null)", "`.text` is null; in the match records it is a string"),
    ("map(.line |= tostring)", "`.line` is a string; in the match records it is a number"),
    ('map(.score = "x")', "a record with `.score`, which the match records do not have"),
    ("map(.line = -5)", "`.line` is -5, a value no match has there"),
    ("map(del(.text))", "a record without `.text`"),
    (".[:1] | map(.line = 1e308 * 10)", "`.line` is 1.7976931348623157e308, a value no match has there"),
]
_FULL_RETYPES = [
    ("map(.file.path = 123)", "`.file.path` is a number; in the match records it is a string"),
    ("map(.match.content = null)", "`.match.content` is null"),
    ('map(.match.score = "x")', "a record with `.match.score`"),
    ("map(.match.ranks = [1])", "a record with `.match.ranks`"),
    ("map(.match.span.line_start = -5)", "`.match.span.line_start` is -5, a value no match has there"),
    ("map(.match.span.byte_end = 1e19)", "`.match.span.byte_end` is 10000000000000000000, a value no match"),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("expr", "says", "extra"),
    [
        *((expr, says, extra) for expr, says in _COMPACT_RETYPES for extra in ({}, {"output_mode": "file_ref"})),
        *((expr, says, {"stats": "only"}) for expr, says in _COMPACT_RETYPES[:2]),
        *((expr, says, {"detail": "full"}) for expr, says in _FULL_RETYPES),
        *((expr, says, {"output_mode": "legacy"}) for expr, says in _FULL_RETYPES[:2]),
    ],
)
async def test_a_jq_filter_that_retypes_a_field_is_refused_clearly(code_tree, tmp_path, expr, says, extra):
    """A filter may rewrite any field of a record. Before (found by an audit), a rewritten
    field broke the page later with a raw Python error ("object of type 'int' has no len()",
    "type str doesn't define __round__ method", "Tool result contains a non-finite float
    (inf)"), or served a score of 1.8e308 that rounding made infinite. Now each is
    invalid_jq_filter naming the field as the filter sees it, in the shape it sees (compact
    records by default, full ones with detail=full or legacy output)."""
    async with Client(build_app(make_settings(code_tree, tmp_path))) as c:
        args = {"pattern": "needle", "jq_filter": expr, **extra}
        r = await c.call_tool("regex_search", args, raise_on_error=False)
        assert r.is_error, r
        error = structured(r)["error"]
        assert error["code"] == "invalid_jq_filter" and says in error["message"], error


async def test_sql_over_offloaded_results_and_their_listing(wide_tree, tmp_path):
    """SQL over a page's file, its whole list and the full-detail list; what SQL may not do.
    (Deleting them is the store's retention sweep: tests/test_output_offload.py.)"""
    async with Client(app_for(wide_tree, tmp_path)) as c:
        body = structured(
            await c.call_tool("regex_search", {"pattern": "hit_", "page_size": 100, "output_mode": "file_ref"})
        )
        page, dataset = body["results"]["file_ref"]["id"], body["results"]["file_ref"]["dataset"]["id"]

        listed = structured(await c.call_tool("list-saved-datasets", {}))
        assert {d["id"]: d["rows"] for d in listed["datasets"]} == {page: 100, dataset: 300}

        sql = f"SELECT path, count(*) AS n, min(line) AS first FROM dataset_{dataset} GROUP BY 1 ORDER BY 1"
        rows = structured(await c.call_tool("analyze-with-duckdb", {"query": sql}))["results"]["rows"]
        assert rows == [{"path": f"f{i}.py", "n": 50, "first": 1} for i in range(6)]
        sql = f"SELECT path, count(*) AS n FROM dataset_{page} GROUP BY 1 ORDER BY 1"  # the page file is one too
        rows = structured(await c.call_tool("analyze-with-duckdb", {"query": sql}))["results"]["rows"]
        assert rows == [{"path": "f0.py", "n": 50}, {"path": "f1.py", "n": 50}]
        args = {"pattern": "hit_", "page_size": 100, "output_mode": "file_ref", "detail": "full"}
        full = structured(await c.call_tool("regex_search", args))["results"]["file_ref"]["dataset"]["id"]
        sql = f'SELECT "file".path AS path, count(*) AS n FROM dataset_{full} GROUP BY 1 ORDER BY 1'
        rows = structured(await c.call_tool("analyze-with-duckdb", {"query": sql}))["results"]["rows"]
        assert rows == [{"path": f"f{i}.py", "n": 50} for i in range(6)]
        body = structured(
            await c.call_tool("regex_search", {"pattern": "hit_", "page_size": 100, "output_mode": "file_ref"})
        )
        dataset = body["results"]["file_ref"]["id"]

        refused = await c.call_tool(
            "analyze-with-duckdb", {"query": f"DROP VIEW dataset_{dataset}"}, raise_on_error=False
        )
        assert refused.is_error and refused.structured_content["error"]["code"] == "sql_rejected"
        escape = await c.call_tool(
            "analyze-with-duckdb", {"query": "SELECT * FROM read_csv('/etc/passwd')"}, raise_on_error=False
        )
        assert escape.is_error
        assert structured(await c.call_tool("list-saved-datasets", {}))["count"] >= 4


async def test_unwritable_offload_dir_falls_back_to_a_cut_inline_page(wide_tree, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the output folder should be")
    settings = make_settings(wide_tree, tmp_path, offload={"max_tokens": 4000, "output_dir": blocker / "out"})
    async with Client(build_app(settings)) as c:
        body = structured(await c.call_tool("regex_search", {"pattern": "hit_", "page_size": 100}))
        assert body["results"]["mode"] == "inline" and body["results"]["truncated"]
        assert any("could not be offloaded" in w for w in body["metadata"]["warnings"])
        rest, _ = await walk(c, "regex_search", {"cursor": body["pagination"]["next_cursor"]})
        assert len(ids(page_matches(body)) + ids(rest)) == 300


async def test_a_date_filter_on_the_last_day_a_date_can_hold_lists_what_it_should(wide_tree, tmp_path):
    """`date_to` of a bare date includes its whole day, up to the next day's start, which for
    9999-12-31 is no date: the listing failed with "date value out of range"."""
    async with Client(app_for(wide_tree, tmp_path)) as c:
        ref = structured(await c.call_tool("regex_search", {"pattern": "hit_", "output_mode": "file_ref"}))
        until_the_end = {"filter": {"date_to": "9999-12-31"}}
        listed = structured(await c.call_tool("list-saved-datasets", until_the_end))
        ref = ref["results"]["file_ref"]
        assert {d["id"] for d in listed["datasets"]} == {ref["id"], ref["dataset"]["id"]}
        last_day = {"filter": {"date_from": "9999-12-31", "date_to": "9999-12-31"}}
        assert structured(await c.call_tool("list-saved-datasets", last_day))["datasets"] == []


async def test_a_read_over_the_page_ceiling_is_refused_naming_the_window_that_fits(wide_tree, tmp_path, monkeypatch):
    """A resource read is one answer too. Before (found by an audit): the results resources sent
    any offloaded file whole, a 64 MiB SQL result in one message (the server +448 MB, 118 s).
    Now a read over `MAX_ANSWER_BYTES` is -32602, naming the line window that fits, which
    reads; a single line over it points to SQL and read-dataset-page."""
    monkeypatch.setattr("server.output.offload.MAX_ANSWER_BYTES", 16_384)  # read when the store is made
    settings = make_settings(wide_tree, tmp_path)
    async with Client(build_app(settings)) as c:
        sql = "SELECT i, repeat('x', 200) AS s FROM range(500) t(i)"
        ref = structured(await c.call_tool("analyze-with-duckdb", {"query": sql, "output_mode": "file_ref"}))
        ref = ref["results"]["file_ref"]
        assert ref["size_bytes"] > 100_000
        with pytest.raises(MCPError) as refused:
            await c.read_resource(ref["uri"])
        error = refused.value.error
        assert error.code == INVALID_PARAMS and "over the 16,384 bytes one read may return" in error.message
        window = re.search(r"codepager://results/\S+/lines/1-(\d+)", error.message)
        assert window, error.message
        text = (await c.read_resource(window.group(0)))[0].text
        lines = Path(ref["path"]).read_bytes().splitlines(keepends=True)
        last = int(window.group(1))
        assert text.encode() == b"".join(lines[:last]) and len(text.encode()) <= 16_384 < len(
            b"".join(lines[: last + 1])
        )
        assert len((await c.read_resource(f"{ref['uri']}/lines/2-3"))[0].text.splitlines()) == 2

        long = "SELECT repeat('y', 20000) AS s"
        ref = structured(await c.call_tool("analyze-with-duckdb", {"query": long, "output_mode": "file_ref"}))
        with pytest.raises(MCPError) as refused:
            await c.read_resource(ref["results"]["file_ref"]["uri"] + "/lines/2-2")
        message = refused.value.error.message
        assert "codepager://" not in message and "analyze-with-duckdb or read-dataset-page" in message, message
