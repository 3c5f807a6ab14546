"""Pages after edits, through the MCP tools with real ripgrep, the real model and a real watcher:
a cached list is reused only while the files are unchanged, a page served from a cursor has its
lines re-checked against the files (moved ones corrected, others marked) the same way whether
its list was held in memory, in Redis or restored after a restart, and every page says what
state of the files it reflects."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client

from server.app import build_app
from tests.hostile_helpers import refusal
from tests.server_helpers import make_settings, page_matches, structured

pytestmark = pytest.mark.slow  # real index builds and watcher threads

ALPHA = '''def alpha_sentinel_handler(request):
    """Handle the alpha sentinel request."""
    return request.alpha
'''
BETA = '''def beta_sentinel_handler(request):
    """Handle the beta sentinel request."""
    return request.beta
'''


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/alpha.py").write_text(ALPHA)
    (root / "pkg/beta.py").write_text(BETA)
    return root


def settings(tree: Path, tmp: Path, cache: Path, **sections: dict[str, Any]) -> Any:
    return make_settings(tree, tmp, index={"cache_dir": cache, "ready_wait_s": 120}, **sections)


def only(records: list[dict[str, Any]]) -> dict[str, Any]:
    (record,) = records
    return record


SEARCHES = (
    ("regex_search", {"pattern": "sentinel_handler", "page_size": 1}),
    ("hybrid_search", {"query": "sentinel_handler request", "top_k": 2, "page_size": 1}),
)


async def test_a_cached_list_is_not_reused_after_a_file_it_covers_changed(tree, tmp_path, model_cache):
    async with Client(build_app(settings(tree, tmp_path, model_cache))) as c:
        args = {"query": "alpha_sentinel_handler", "top_k": 2}
        first = structured(await c.call_tool("hybrid_search", args))
        again = structured(await c.call_tool("hybrid_search", args))
        assert (first["metadata"]["cache"], again["metadata"]["cache"]) == ("miss", "hit")
        (tree / "pkg/alpha.py").write_text("# moved\n" * 20 + ALPHA)
        began = time.time()
        after = structured(await c.call_tool("hybrid_search", args))
        assert after["metadata"]["cache"] == "miss"
        freshness = after["metadata"]["freshness"]
        assert freshness["state"] == "current" and freshness["as_of"] >= began - 0.01
        (alpha,) = [m for m in page_matches(after) if "def alpha_sentinel_handler" in m["text"]]
        lines = (tree / "pkg/alpha.py").read_text().splitlines()
        assert alpha["text"].splitlines()[0] == lines[alpha["line"] - 1] == "# moved"


@pytest.mark.parametrize(("tool", "args"), SEARCHES)
async def test_cursor_pages_after_edits_are_rechecked_against_the_files(tree, tmp_path, model_cache, tool, args):
    async with Client(build_app(settings(tree, tmp_path, model_cache))) as c:
        page1 = structured(await c.call_tool(tool, args))
        cursor = page1["pagination"]["next_cursor"]
        second = only(page_matches(structured(await c.call_tool(tool, {"cursor": cursor}))))
        path = tree / second["path"]
        original = path.read_text()

        path.write_text("\n\n\n" + original)  # three lines inserted above it
        moved = structured(await c.call_tool(tool, {"cursor": cursor}))
        record = only(page_matches(moved))
        assert (record["line"], record["changed"]) == (second["line"] + 3, "moved")
        assert moved["metadata"]["freshness"]["changed_count"] == 1 and moved["metadata"]["cache"] == "hit"

        path.write_text(original.replace("sentinel_handler", "renamed_away"))
        assert only(page_matches(structured(await c.call_tool(tool, {"cursor": cursor}))))["changed"] == "edited"
        path.unlink()
        assert only(page_matches(structured(await c.call_tool(tool, {"cursor": cursor}))))["changed"] == "deleted"

        path.write_text(original)  # back as it was: nothing to mark
        back = structured(await c.call_tool(tool, {"cursor": cursor}))
        assert "changed" not in only(page_matches(back)) and back["metadata"]["freshness"]["changed_count"] == 0


@pytest.mark.parametrize(("tool", "args"), SEARCHES)
async def test_after_a_restart_regex_and_hybrid_cursors_follow_one_rule(tree, tmp_path, model_cache, tool, args):
    """The list is gone with the process: a cursor continues (restored) when a re-run gives the
    very list it walked, and is refused with the same error in every mode when files changed."""
    async with Client(build_app(settings(tree, tmp_path, model_cache))) as c:
        page1 = structured(await c.call_tool(tool, args))
        page2 = structured(await c.call_tool(tool, {"cursor": page1["pagination"]["next_cursor"]}))
    cursor = page1["pagination"]["next_cursor"]
    async with Client(build_app(settings(tree, tmp_path, model_cache))) as restarted:
        again = structured(await restarted.call_tool(tool, {"cursor": cursor}))
        assert again["metadata"]["cache"] == "restored"
        assert page_matches(again) == page_matches(page2)
    path = tree / only(page_matches(page2))["path"]
    path.write_text("\n" + path.read_text())
    async with Client(build_app(settings(tree, tmp_path, model_cache))) as restarted:
        refused = await refusal(restarted, tool, {"cursor": cursor})
        assert "The results behind this cursor have changed" in refused["message"], refused


@pytest.mark.parametrize(("tool", "args"), SEARCHES)
async def test_redis_sessions_recheck_pages_as_memory_does(tree, tmp_path, model_cache, redis_server, tool, args):
    # a Redis database of this search's own (sessions.namespace is no longer a setting)
    database = 1 + [name for name, _ in SEARCHES].index(tool)
    shared = {"sessions": {"backend": redis_server.url.removesuffix("/0") + f"/{database}"}}
    async with Client(build_app(settings(tree, tmp_path, model_cache, **shared))) as first:
        page1 = structured(await first.call_tool(tool, args))
    cursor = page1["pagination"]["next_cursor"]
    async with Client(build_app(settings(tree, tmp_path, model_cache, **shared))) as other:
        second = only(page_matches(structured(await other.call_tool(tool, {"cursor": cursor}))))
        path = tree / second["path"]
        path.write_text("\n\n" + path.read_text())
        moved = structured(await other.call_tool(tool, {"cursor": cursor}))
        assert moved["metadata"]["cache"] == "hit"  # the list held in Redis, not re-run
        record = only(page_matches(moved))
        assert (record["line"], record["changed"]) == (second["line"] + 2, "moved")
