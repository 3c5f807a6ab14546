"""Answers that cost an agent few tokens: compact pages, one printer for every sink, a grep-like
text block, declared output schemas, a small tools/list and page budgets per client.

Everything runs the real server in process (fastmcp Client), the real ripgrep, the real CLI
and real DuckDB over the offloaded file."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import starlette
from fastmcp import Client
from mcp_types import Implementation

import search_engine.config
from harness.commands import codepager_cmd
from search_engine.engine import SearchEngine
from search_engine.models import Match, MatchType, SearchRequest
from search_engine.regex.ripgrep import rg_path
from server.app import build_app
from server.cli import main as cli_main
from server.clients import profile_for
from server.output import estimate_tokens
from server.proxy.app import build_proxy_app
from server.proxy.backends import command_backend
from server.records import Detail, group_by_file, match_record, records_of_groups
from server.settings import load_settings
from server.tools.registry import own_tools
from tests.jq_recipes import run_recipe
from tests.proxy_helpers import proxy_settings, stdio_transport
from tests.server_helpers import make_settings, page_matches, serve_env, structured, walk


def client_for(app: Any, name: str | None = None) -> Client[Any]:
    info = Implementation(name=name, version="1.0") if name else None
    return Client(app, client_info=info)


def wire_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# -- the printer ---------------------------------------------------------------------------------


def _match(path: str, line: int, end: int | None = None, **fields: Any) -> Match:
    return Match(
        path=path,
        line_start=line,
        line_end=end or line,
        byte_start=0,
        byte_end=1,
        content=fields.pop("content", f"line {line}"),
        type=fields.pop("type", MatchType.REGEX),
        **fields,
    )


def test_compact_records_group_by_file_and_back() -> None:
    """Grouping writes each path once and loses nothing: plain matches become `line: text`,
    anything more (span, score, context, no snippet) an object; the inverse gives the records."""
    matches = [
        _match("a.py", 3),
        _match("a.py", 9, 12, content="def f():\n    pass\n\n# end"),
        _match("b.py", 1, context_before=(), context_after=("after",)),
        _match("c.py", 5, type=MatchType.HYBRID, score=0.0328765, ranks={"lexical": 1}),
    ]
    records = [match_record(m, detail=Detail.COMPACT) for m in matches]
    assert records[1] == {"path": "a.py", "line": 9, "end": 12, "text": "def f():\n    pass\n\n# end"}
    assert records[3] == {"path": "c.py", "line": 5, "text": "line 5", "score": 0.03288}  # 4 digits, no ranks
    grouped = group_by_file(records)
    assert grouped == {
        "a.py": {"3": "line 3", "9-12": "def f():\n    pass\n\n# end"},
        "b.py": {"1": {"text": "line 1", "after": ["after"]}},
        "c.py": {"5": {"text": "line 5", "score": 0.03288}},
    }
    assert records_of_groups(grouped) == records
    bare = [match_record(m, detail=Detail.COMPACT, snippet_length=0) for m in matches[:1]]
    assert group_by_file(bare) == {"a.py": {"3": None}} and records_of_groups(group_by_file(bare)) == bare


async def test_cli_mcp_page_offloaded_file_and_saved_dataset_hold_the_same_records(
    code_tree, tmp_path, capsys, monkeypatch
):
    """One printer: `codepager search --jsonl`, the MCP page (ungrouped), the offloaded JSONL
    lines and DuckDB's rows over that file are the same records, at both detail levels."""
    monkeypatch.chdir(code_tree)  # the CLI searches the working directory, as rg does
    async with Client(build_app(make_settings(code_tree, tmp_path))) as c:
        for detail in ("compact", "full"):
            assert cli_main(["search", "--jsonl", "--detail", detail, "needle_1_"]) == 0
            cli = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
            args = {"pattern": "needle_1_", "page_size": 200, "detail": detail}
            inline = page_matches(structured(await c.call_tool("regex_search", args)))
            offloaded = structured(await c.call_tool("regex_search", {**args, "output_mode": "file_ref"}))
            assert len(cli) == 20 and inline == cli and page_matches(offloaded) == cli, detail
        dataset = offloaded["results"]["file_ref"]["id"]
        compact_id = structured(await c.call_tool("regex_search", {"pattern": "needle_1_", "output_mode": "file_ref"}))
        sql = f"SELECT path, line, text FROM dataset_{compact_id['results']['file_ref']['id']} ORDER BY path, line"
        rows = structured(await c.call_tool("analyze-with-duckdb", {"query": sql}))["results"]["rows"]
        compact_cli = [{k: r[k] for k in ("path", "line", "text")} for r in page_matches(compact_id)]
        assert rows == sorted(compact_cli, key=lambda r: (r["path"], r["line"]))
        assert dataset != compact_id["results"]["file_ref"]["id"]


async def test_offloaded_compact_file_gets_recipes_that_fit_its_lines(code_tree, tmp_path):
    """The descriptor's line_schema and jq recipes describe the compact lines; every recipe runs
    (its jq part on libjq: the tests assume no jq program) and prints something."""
    async with Client(build_app(make_settings(code_tree, tmp_path))) as c:
        body = structured(await c.call_tool("regex_search", {"pattern": "needle", "output_mode": "file_ref"}))
    ref = body["results"]["file_ref"]
    assert set(ref["line_schema"]["properties"]) == {"path", "line", "text"}
    assert ref["summary"]["languages"] == {"python": 50}
    for recipe in ref["jq_recipes"]:
        assert run_recipe(recipe["command"]).strip(), recipe


# -- the text block -----------------------------------------------------------------------------


async def test_text_block_is_rg_heading_output_with_a_header(code_tree, tmp_path):
    """For a client that shows text, the text block is exactly what `rg --heading -n` prints for
    the same matches, under a header with the counts and the next cursor."""
    async with client_for(build_app(make_settings(code_tree, tmp_path)), "cursor-vscode") as c:
        result = await c.call_tool("regex_search", {"pattern": "needle_[12]_1?[0-9]\\b", "page_size": 40})
    body = structured(result)
    header, *lines = result.content[0].text.splitlines()
    assert header == "regex_search 'needle_[12]_1?[0-9]\\b': 40 of 40 matches, last page"
    rg = subprocess.run(
        [rg_path(), "--no-config", "--sort", "path", "--heading", "-n", "needle_[12]_1?[0-9]\\b"],
        cwd=code_tree,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "\n".join(lines) == rg.replace("\n\n", "\n").rstrip("\n")  # rg separates files by a blank line
    assert body["results"]["count"] == 40


async def test_a_client_that_shows_only_structured_content_gets_a_header_as_text(code_tree, tmp_path):
    """Claude Code and Codex show the model structuredContent only, so the matches are not sent
    twice: the text block is a header, and text + structuredContent <= 1.3x structuredContent."""
    app = build_app(make_settings(code_tree, tmp_path))
    for name in ("claude-code", "codex-mcp-client"):
        async with client_for(app, name) as c:
            result = await c.call_tool("regex_search", {"pattern": "needle", "page_size": 50})
        body = structured(result)
        text = result.content[0].text
        assert text.endswith("matches: see structuredContent\n") and len(text.splitlines()) == 2
        assert (len(text) + len(wire_json(body))) / len(wire_json(body)) <= 1.3


async def test_detail_full_text_block_is_the_same_grep_text(code_tree, tmp_path):
    async with Client(build_app(make_settings(code_tree, tmp_path))) as c:
        compact = await c.call_tool("regex_search", {"pattern": "needle_4_[15]\\b", "context_lines": 1})
        full = await c.call_tool("regex_search", {"pattern": "needle_4_[15]\\b", "context_lines": 1, "detail": "full"})
    assert compact.content[0].text.splitlines()[1:] == full.content[0].text.splitlines()[1:]
    assert "--" in compact.content[0].text.splitlines()  # context groups are separated as grep does


# -- output schemas and tools/list ----------------------------------------------------------------


async def test_every_tool_declares_an_output_schema_its_real_answers_meet(code_tree, tmp_path):
    app = build_app(make_settings(code_tree, tmp_path))
    async with Client(app) as c:
        schemas = {t.name: t.output_schema for t in await c.list_tools()}
        assert all(schemas.values()), schemas
        calls = [
            ("regex_search", {"pattern": "needle", "page_size": 5}),
            ("regex_search", {"pattern": "needle", "page_size": 5, "detail": "full"}),
            ("regex_search", {"pattern": "needle", "page_size": 5, "output_mode": "file_ref"}),
            ("regex_search", {"pattern": "needle", "page_size": 5, "output_mode": "legacy"}),
            ("regex_search", {"pattern": "needle", "stats": "only"}),
            ("regex_search", {"pattern": "needle", "stats": "first", "max_output_tokens": 300}),
            ("hybrid_search", {"query": "needle", "mode": "semantic", "snippet_length": 0}),
            ("index_status", {}),
            ("list-saved-datasets", {}),
            ("analyze-with-duckdb", {"query": "SELECT 1 AS one"}),
        ]
        for tool, args in calls:
            result = await c.call_tool(tool, args)
            jsonschema.validate(result.structured_content, schemas[tool])
        bad = {"results": {"mode": "inline"}}  # the schema is not vacuous
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schemas["regex_search"])


#: tools/list's budget, in characters of compact JSON (issue 37.7: 6,000, with every parameter of
#: every tool described), and that of the part a model is shown (each tool's name, description and
#: inputSchema: what Claude Code and Codex put in the model's context; title, outputSchema,
#: annotations and _meta are read by the client). Describing all 59 parameters of eight tools took
#: the listing to 8,680; it fits by listing less that says nothing new: semantic search is
#: hybrid_search's `mode` (not a third copy of its schema), `snippet_length: 0` is the old
#: `include_snippet: false`, one `stats` enum the two flags that excluded each other, and deleting
#: offloaded files is the retention sweep's job, not a tool's.
TOOLS_LIST_BUDGET = 6_000
MODEL_SHOWN_BUDGET = 5_000


async def test_tools_list_is_small_and_keeps_the_size_hint(code_tree, tmp_path):
    """tools/list is in every conversation: at most TOOLS_LIST_BUDGET characters of compact JSON
    for the default server, MODEL_SHOWN_BUDGET of them what a model reads; search tools keep
    `anthropic/maxResultSizeChars`."""
    app = build_app(make_settings(code_tree, tmp_path))
    async with Client(app) as c:
        tools = await c.list_tools()
        listed = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
        assert len(wire_json(listed)) <= TOOLS_LIST_BUDGET, len(wire_json(listed))
        shown = wire_json([{k: t[k] for k in ("name", "description", "inputSchema")} for t in listed])
        assert len(shown) <= MODEL_SHOWN_BUDGET, len(shown)
        regex = next(t for t in tools if t.name == "regex_search")
        assert regex.meta == {"anthropic/maxResultSizeChars": 80_000}
        body = structured(
            await c.call_tool("regex_search", {"pattern": "needle", "stats": "only", "snippet_length": 0})
        )
        assert body["results"]["mode"] == "stats_only"
        # What the listing leaves out is still enforced: the enum, the floors of 0 and 1, and
        # `additionalProperties: false` (the refusal notes what this tool calls a sibling's argument).
        assert not any("additionalProperties" in t["inputSchema"] for t in listed)
        assert "minimum" not in wire_json([t["inputSchema"]["properties"]["page_size"] for t in listed[:2]])
        for bad, named in (({"output_mode": "sideways"}, "output_mode"), ({"page_size": 0}, "page_size"),
                           ({"query": "x"}, "use `pattern`")):  # fmt: skip
            with pytest.raises(Exception, match=named):
                await c.call_tool("regex_search", {"pattern": "needle", **bad})


async def test_every_parameter_of_every_tool_is_described_in_its_schema(code_tree, tmp_path):
    """Issue 37.7: the parameters were documented only in the server's instructions, which some
    clients never show. Now every parameter of every tool is listed in its input schema with a
    type and a one-line description, the shared presentation options included, and `threshold`
    says what it is compared with in each ranked tool."""
    app = build_app(make_settings(code_tree, tmp_path))
    async with Client(app) as c:
        tools = {t.name: t for t in await c.list_tools()}
    shared = ("snippet_length", "page_size", "cursor", "output_mode", "max_output_tokens", "stats", "jq_filter",
              "detail")  # fmt: skip
    for name in ("regex_search", "hybrid_search"):
        assert set(shared) <= set(tools[name].input_schema["properties"]), name
    for name, tool in tools.items():
        for parameter, schema in tool.input_schema["properties"].items():
            description = schema.get("description", "")
            assert description and "\n" not in description and len(description) <= 100, (name, parameter)
            assert "type" in schema, (name, parameter)
    threshold = tools["hybrid_search"].input_schema["properties"]["threshold"]["description"]
    assert "best" in threshold and "semantic: cosine" in threshold, threshold
    assert "jq_filter" not in (app.instructions or "")  # not described twice


@pytest.mark.slow
async def test_proxy_injected_tools_are_compact_too(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    cmd, args = codepager_cmd()
    backend = command_backend([cmd, *args, "serve", "--root", str(root)], timeout_s=120)
    transport = stdio_transport(backend)
    transport.env = {**(transport.env or {}), **serve_env(tmp_path)}
    app = build_proxy_app(proxy_settings(tmp_path), [backend])
    assert own_tools(app) == ("analyze-with-duckdb", "list-saved-datasets", "read-dataset-page")
    async with Client(app, timeout=120, init_timeout=120) as c:
        tools = {t.name: t for t in await c.list_tools()}
    injected = wire_json([tools[n].model_dump(mode="json", by_alias=True, exclude_none=True) for n in own_tools(app)])
    assert len(injected) <= 1750, len(injected)  # 1,600 undescribed, 1,810 described, 1,719 said once
    assert all(tools[n].output_schema for n in own_tools(app))


# -- client budgets -----------------------------------------------------------------------------


def test_client_table_and_overrides() -> None:
    offload = load_settings().offload
    assert profile_for("claude-code", offload).ceiling.tokens == 25_000
    codex = profile_for("codex-mcp-client", offload).ceiling
    assert (codex.bytes, codex.lines) == (10 * 1024, 256)
    assert profile_for("Cursor", offload).reads == "text"
    unknown = profile_for(None, offload)
    assert (unknown.key, unknown.ceiling.tokens, unknown.reads) == ("unknown", offload.max_tokens, "both")
    custom = load_settings(None, {"offload": {"clients": {"claude-code": {"max_tokens": 4000, "reads": "structured"}}}})
    assert profile_for("claude-code", custom.offload).ceiling.tokens == 4000


@pytest.mark.parametrize(
    ("client", "limit_bytes", "limit_tokens"),
    [("codex-mcp-client", 10 * 1024, 10 * 1024), ("claude-code", 1 << 20, 25_000), (None, 1 << 20, 20_000)],
)
async def test_each_client_gets_pages_within_its_limit_and_the_walk_is_lossless(
    code_tree, tmp_path, client, limit_bytes, limit_tokens
):
    """Long lines make 200-match pages of ~60 KB: Codex's 10 KiB is cut (losslessly, the next
    cursor resumes at the first omitted match) or offloaded; other clients see them whole."""
    for f in sorted(code_tree.glob("pkg/*.py"))[:4]:
        f.write_text("".join(f"long_{f.stem}_{i} = '{'x' * 250}'\n" for i in range(60)))
    app = build_app(make_settings(code_tree, tmp_path))
    async with client_for(app, client) as c:
        matches, responses = await walk(
            c, "regex_search", {"pattern": "long_", "page_size": 200, "output_mode": "inline"}
        )
        for body in responses:
            text = wire_json(body)
            assert len(text.encode()) <= limit_bytes and estimate_tokens(text) <= limit_tokens
        assert [(m["path"], m["line"]) for m in matches] == [
            (m.path, m.line_start)
            for m in SearchEngine().search(SearchRequest(query="long_", root=str(code_tree.resolve()))).matches
        ]
        cut = client == "codex-mcp-client"
        assert (len(responses) > 2) is cut and (responses[0]["results"]["count"] < 200) is cut
        auto = structured(await c.call_tool("regex_search", {"pattern": "long_", "page_size": 200}))
        assert auto["results"]["mode"] == ("file_ref" if cut else "inline")
        assert len(wire_json(auto).encode()) <= limit_bytes
        small = structured(
            await c.call_tool("regex_search", {"pattern": "long_", "page_size": 200, "max_output_tokens": 600})
        )
        assert estimate_tokens(wire_json(small)) <= 600 and small["results"]["count"] < 200


async def test_codex_line_limit_applies_to_a_text_reading_client(code_tree, tmp_path):
    """A client configured to read text with a line limit gets text blocks within it."""
    settings = make_settings(
        code_tree, tmp_path, offload={"clients": {"linebound": {"max_lines": 40, "reads": "text"}}}
    )
    async with client_for(build_app(settings), "linebound-cli") as c:
        matches, _ = await walk(c, "regex_search", {"pattern": "needle", "page_size": 100, "output_mode": "inline"})
        result = await c.call_tool("regex_search", {"pattern": "needle", "page_size": 100, "output_mode": "inline"})
    assert len(result.content[0].text.splitlines()) <= 40
    assert len(matches) == 240


@pytest.mark.parametrize("pattern", ["def ", "import "])
async def test_a_compact_page_costs_no_more_than_rg_n_on_real_code(tmp_path, pattern):
    """On real code (starlette, as installed, laid out like the benchmark corpora: the package's
    folder inside the root), the default page of 50 matches, envelope and cursor included, is
    no larger than what `rg -n` prints for the same 50 matches."""
    root = tmp_path / "corpus"
    shutil.copytree(Path(starlette.__file__).parent, root / "starlette", ignore=shutil.ignore_patterns("__pycache__"))
    async with Client(build_app(make_settings(root, tmp_path))) as c:
        body = structured(await c.call_tool("regex_search", {"pattern": pattern, "page_size": 50}))
    rg = subprocess.run(
        [rg_path(), "--no-config", "--sort", "path", "-n", pattern],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rg_n = "".join(rg.splitlines(keepends=True)[:50])
    assert [f"{r['path']}:{r['line']}:{r['text']}" for r in page_matches(body)] == rg_n.splitlines()
    assert len(wire_json(body)) <= len(rg_n), (len(wire_json(body)), len(rg_n))


async def test_a_match_too_big_for_the_budget_keeps_its_path_whole(code_tree, tmp_path, monkeypatch):
    """The last resort (one match over the limit) cuts its text, never the path it is grouped
    under, even when the path alone is over the budget: a cut path would name no file. (Lines
    are not cut to the engine's width first, so the match's own text is what is over.)"""
    monkeypatch.setattr(search_engine.config, "DEFAULT_MAX_LINE_WIDTH", 8000)
    long_path = "/".join(["pkg", *(f"{i}" + "d" * 240 for i in range(5)), "m.py"])  # 1,200+ characters
    (code_tree / long_path).parent.mkdir(parents=True)
    (code_tree / long_path).write_text("giant = '" + "y" * 6000 + "'\n")
    async with Client(build_app(make_settings(code_tree, tmp_path))) as c:
        args = {"pattern": "giant", "max_output_tokens": 256, "snippet_length": 2000}
        body = structured(await c.call_tool("regex_search", args))
    ((path, entries),) = body["results"]["files"].items()
    assert path == long_path and "…[cut " in entries["1"] and len(entries["1"]) < 1000
    assert any("longest fields were cut" in w for w in body["metadata"]["warnings"])
    assert any("still over the limit" in w for w in body["metadata"]["warnings"])
