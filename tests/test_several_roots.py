"""A server with several roots searches every one of them when no `path` picks one (before,
only the first root was searched, in every mode, and nothing said so). Each match is labelled
by its root (its path is absolute), `path` picks one root, and a search over several roots
pages, restores from its cursor and is indexed (every root) like a search of one.

Real parts: the fastmcp Client in memory, real ripgrep, the shipped static model, real
indexes on disk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from mcp import MCPError

from search_engine import SearchMode, SearchRequest
from search_engine.models import Freshness
from search_engine.roots import combined_freshness
from server.app import build_app
from tests.server_helpers import make_settings, page_matches, structured, walk

RETRY = '''
def retry_with_backoff(fn, attempts=5, base_delay=0.1):
    """Call fn until it succeeds, sleeping exponentially longer between failed attempts."""
    for i in range(attempts):
        try:
            return fn()
        except Exception:  # needle
            time.sleep(base_delay * 2 ** i)
'''

COOKIES = '''
def parse_cookie_header(header):
    """Split a Cookie request header into a dict of cookie name -> value."""
    out = {}  # needle
    for part in header.split(";"):
        name, value = part.split("=", 1)  # needle
        out[name.strip()] = value.strip()
    return out
'''


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    """Two roots holding the same relative path (`src/util.py`), and a file each of their own."""
    alpha, beta = tmp_path / "alpha", tmp_path / "beta"
    for root, own, text in ((alpha, "retry.py", RETRY), (beta, "cookies.py", COOKIES)):
        (root / "src").mkdir(parents=True)
        (root / "src" / own).write_text(text)
        (root / "src" / "util.py").write_text(f"# needle in {root.name}\nVALUE = '{root.name}'  # needle\n")
    return alpha.resolve(), beta.resolve()


def settings_for(roots: tuple[Path, ...], tmp: Path, **sections: dict[str, Any]) -> Any:
    return make_settings(roots[0], tmp, server={"roots": list(roots)}, **sections)


def places(matches: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(m["path"], m["line"]) for m in matches]


async def refusal(client: Client[Any], tool: str, args: dict[str, Any]) -> str:
    """The message of a refused call, whichever channel carries it (JSON-RPC error or isError)."""
    try:
        result = await client.call_tool(tool, args, raise_on_error=False)
    except MCPError as exc:
        return exc.error.message
    assert result.is_error, result
    return str(result.structured_content)


async def test_regex_without_path_searches_every_root_and_labels_each_match(roots, tmp_path) -> None:
    alpha, beta = roots
    async with Client(build_app(settings_for(roots, tmp_path))) as c:
        matches, responses = await walk(c, "regex_search", {"pattern": "needle", "page_size": 2})
        assert places(matches) == [
            (f"{alpha}/src/retry.py", 7),
            (f"{alpha}/src/util.py", 1),
            (f"{alpha}/src/util.py", 2),
            (f"{beta}/src/cookies.py", 4),
            (f"{beta}/src/cookies.py", 6),
            (f"{beta}/src/util.py", 1),
            (f"{beta}/src/util.py", 2),
        ]
        assert responses[0]["results"]["total_count"] == 7 and len(responses) == 4
        # Pages after the first are rechecked against the files, each match in its own root.
        assert not [m for m in matches if "changed" in m]
        assert responses[0]["search"]["parameters"]["roots"] == [str(alpha), str(beta)]

        # `path` picks one root (absolute, or relative to the first): paths relative to it.
        only_beta = structured(await c.call_tool("regex_search", {"pattern": "needle", "path": str(beta)}))
        assert places(page_matches(only_beta)) == [("src/cookies.py", 4), ("src/cookies.py", 6), ("src/util.py", 1),
                                                   ("src/util.py", 2)]  # fmt: skip
        in_first = structured(await c.call_tool("regex_search", {"pattern": "needle", "path": "src/util.py"}))
        assert places(page_matches(in_first)) == [("src/util.py", 1), ("src/util.py", 2)]
        # A path a match shows searches that file again.
        again = structured(await c.call_tool("regex_search", {"pattern": "needle", "path": matches[-1]["path"]}))
        assert places(page_matches(again)) == [("src/util.py", 1), ("src/util.py", 2)]

        # A cursor of the search over every root refuses a path sent with it (it would search one).
        cursor = responses[0]["pagination"]["next_cursor"]
        assert "path" in await refusal(c, "regex_search", {"cursor": cursor, "path": str(alpha)})

    # Restarted (its sessions gone), the same cursor re-runs the search over both roots and
    # continues where it was, proven the same list.
    async with Client(build_app(settings_for(roots, tmp_path))) as restarted:
        page2 = structured(await restarted.call_tool("regex_search", {"cursor": cursor}))
        assert page2["metadata"]["cache"] == "restored"
        assert page_matches(page2) == page_matches(responses[1])


async def test_a_later_page_rechecks_each_match_in_its_own_root(roots, tmp_path) -> None:
    _, beta = roots
    async with Client(build_app(settings_for(roots, tmp_path))) as c:
        first = structured(await c.call_tool("regex_search", {"pattern": "needle", "page_size": 3}))
        (beta / "src" / "util.py").write_text("# two lines above now\n\n# needle in beta\nVALUE = 'beta'  # needle\n")
        (beta / "src" / "cookies.py").unlink()
        rest, _ = await walk(c, "regex_search", {"cursor": first["pagination"]["next_cursor"]})
    assert [(m["path"], m["line"], m.get("changed")) for m in rest] == [
        (f"{beta}/src/cookies.py", 4, "deleted"),
        (f"{beta}/src/cookies.py", 6, "deleted"),
        (f"{beta}/src/util.py", 3, "moved"),
        (f"{beta}/src/util.py", 4, "moved"),
    ]


async def test_max_results_counts_over_every_root_and_the_total_stays_exact(roots, tmp_path) -> None:
    alpha, _ = roots
    settings = settings_for(roots, tmp_path, search={"max_results": 2})
    async with Client(build_app(settings)) as c:
        body = structured(await c.call_tool("regex_search", {"pattern": "needle"}))
    assert places(page_matches(body)) == [(f"{alpha}/src/retry.py", 7), (f"{alpha}/src/util.py", 1)]
    assert body["results"]["truncated"] and body["results"]["search_total_count"] == 7


async def test_a_root_inside_another_is_searched_once(roots, tmp_path) -> None:
    alpha, _ = roots
    inner = alpha / "src"
    async with Client(build_app(settings_for((inner, alpha), tmp_path))) as c:
        body = structured(await c.call_tool("regex_search", {"pattern": "needle"}))
    assert places(page_matches(body)) == [("src/retry.py", 7), ("src/util.py", 1), ("src/util.py", 2)]


async def test_a_missing_root_is_an_error_not_a_silent_gap(roots, tmp_path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    async with Client(build_app(settings_for((*roots, gone), tmp_path))) as c:
        gone.rmdir()
        message = await refusal(c, "regex_search", {"pattern": "needle"})
    assert "does not exist" in message and str(gone) in message


@pytest.mark.slow
async def test_ranked_search_without_path_indexes_and_merges_every_root(roots, tmp_path, model_cache) -> None:
    """Both roots are indexed on the first search (nothing indexes on start here), and their
    ranked lists merge by score: the cookie parser, only in the second root, comes first."""
    alpha, beta = roots
    settings = settings_for(roots, tmp_path, index={"cache_dir": model_cache, "ready_wait_s": 120})
    async with Client(build_app(settings)) as c:
        for mode, query in (
            ("hybrid", "parse_cookie_header"),
            ("semantic", "split a cookie request header into names and values"),
        ):
            body = structured(await c.call_tool("hybrid_search", {"query": query, "mode": mode, "top_k": 20}))
            found = page_matches(body)
            assert found[0]["path"] == f"{beta}/src/cookies.py", (mode, found)
            assert {m["path"].split("/src/")[0] for m in found} == {str(alpha), str(beta)}
            scores = [m["score"] for m in found]
            assert scores == sorted(scores, reverse=True)
        hybrid_top = page_matches(structured(await c.call_tool("hybrid_search", {"query": "retry_with_backoff"})))
        assert hybrid_top[0]["path"] == f"{alpha}/src/retry.py" and hybrid_top[0]["score"] == 1.0
        for root in roots:
            status = structured(await c.call_tool("index_status", {"path": str(root)}))
            assert status["exists"] and status["files"] == 2, status

        args = {"query": "cookie header retry backoff", "top_k": 6, "page_size": 1}
        matches, responses = await walk(c, "hybrid_search", args)
        assert len(matches) >= 3 and len(set(places(matches))) == len(matches)
    async with Client(build_app(settings)) as restarted:
        page2 = structured(
            await restarted.call_tool("hybrid_search", {"cursor": responses[0]["pagination"]["next_cursor"]})
        )
        assert page2["metadata"]["cache"] == "restored"
        assert page_matches(page2) == page_matches(responses[1])


@pytest.mark.slow
async def test_index_status_and_reindex_without_path_cover_every_root(roots, tmp_path) -> None:
    """With no `path`, `index_status` reports on every root and `reindex` builds every root
    (before, both acted on the first root only, and the answer did not say so); `path` still
    picks one root, answered as before."""
    alpha, beta = roots
    async with Client(build_app(settings_for(roots, tmp_path, index={"ready_wait_s": 120}))) as c:
        before = structured(await c.call_tool("index_status", {}))
        assert [s["root"] for s in before["roots"]] == [str(alpha), str(beta)] and not before["building"]
        assert [(s["exists"], s["progress"]["phase"]) for s in before["roots"]] == [(False, "idle")] * 2

        built = structured(await c.call_tool("reindex", {}))
        assert [(s["root"], s["exists"], s["files"]) for s in built["roots"]] == [
            (str(alpha), True, 2),
            (str(beta), True, 2),
        ]
        assert [s["progress"]["phase"] for s in built["roots"]] == ["ready", "ready"] and not built["building"]

        (beta / "src" / "more.py").write_text("def more():\n    return 'more'\n")
        again = structured(await c.call_tool("reindex", {}))
        assert [(s["generation"], s["files"]) for s in again["roots"]] == [(1, 2), (2, 3)], again
        status = structured(await c.call_tool("index_status", {}))
        assert [s["files"] for s in status["roots"]] == [2, 3]

        one = structured(await c.call_tool("index_status", {"path": str(beta / "src")}))
        assert one["root"] == str(beta) and one["files"] == 3 and "roots" not in one


def test_a_search_of_several_roots_is_its_own_session_and_one_root_hashes_as_before() -> None:
    one = SearchRequest(mode=SearchMode.HYBRID, query="q", root="/a")
    several = SearchRequest(mode=SearchMode.HYBRID, query="q", root="/a", roots=("/a", "/b"))
    assert "roots" not in one.canonical_json() and '"roots":["/a","/b"]' in several.canonical_json()
    assert one.params_hash() != several.params_hash()
    assert several.in_root("/b") == SearchRequest(mode=SearchMode.HYBRID, query="q", root="/b")
    for bad in (
        {"roots": ("/a",)},
        {"roots": ("/b", "/a")},
        {"roots": ("/a", "/a")},
        {"roots": ("/a", "/b"), "path": "x"},
    ):
        with pytest.raises(ValueError, match="root"):
            SearchRequest(query="q", root="/a", **bad)


def test_the_least_settled_root_says_what_the_results_reflect() -> None:
    current = Freshness("current", 10.0, 10.0, "events")
    updating = Freshness("updating", 12.0, 9.0, "polling", 2, ["a.py", "lib"], "cannot watch")
    assert combined_freshness([("/r1", current), ("/r2", updating)]) == Freshness(
        "updating", 10.0, 9.0, "polling", 2, ["/r2/a.py", "/r2/lib"], "/r2: cannot watch"
    )
    assert combined_freshness([("/r1", current), ("/r2", current)]) == current
    assert combined_freshness([(None, updating)]) is updating and combined_freshness([]) is None
