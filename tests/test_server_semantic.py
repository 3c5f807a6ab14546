"""Semantic and hybrid search through the MCP tools, with the real shipped static model and a
real on-disk index."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from fastmcp import Client

from search_engine.embedding.embedder import STATIC_RELEVANCE_FLOOR
from server.app import build_app
from tests.server_helpers import make_settings, page_matches, structured, walk

CLIENT = '''
class ClientSession:
    """An HTTP client session holding a pool of keep-alive connections."""

    def __init__(self, pool_size=10):
        self.pool_size = pool_size

    def close(self):
        """Release every pooled connection."""
        self.pool = None
'''

RETRY = '''
import time


def retry_with_backoff(fn, attempts=5, base_delay=0.1):
    """Call fn until it succeeds, sleeping exponentially longer between failed attempts."""
    for i in range(attempts):
        try:
            return fn()
        except Exception:
            time.sleep(base_delay * 2 ** i)
    raise RuntimeError("gave up after retries")
'''

COOKIES = '''
def parse_cookie_header(header):
    """Split a Cookie request header into a dict of cookie name -> value."""
    out = {}
    for part in header.split(";"):
        if "=" in part:
            name, value = part.split("=", 1)
            out[name.strip()] = value.strip()
    return out
'''


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "net").mkdir(parents=True)
    (root / "net" / "client.py").write_text(CLIENT)
    (root / "net" / "retry.py").write_text(RETRY)
    (root / "web").mkdir()
    (root / "web" / "cookies.py").write_text(COOKIES)
    (root / "README.md").write_text("# demo\n\nA tiny HTTP toolkit: sessions, retries and cookies.\n")
    return root


def settings_for(root: Path, tmp: Path, cache: Path, **index):
    return make_settings(root, tmp, index={"cache_dir": cache, "ready_wait_s": 120, **index})


async def test_hybrid_finds_symbols_and_explains_why(repo, tmp_path, model_cache):
    async with Client(build_app(settings_for(repo, tmp_path, model_cache))) as c:
        body = structured(await c.call_tool("hybrid_search", {"query": "client_session", "top_k": 3}))
        top = page_matches(body)[0]
        assert top["path"] == "net/client.py" and top["line"] == 2 and top["end"] > 2
        assert "ClientSession" in top["text"] and top["score"] > 0 and "ranks" not in top  # ranks on request
        assert body["search"]["mode"] == "hybrid"

        args = {"query": "client_session", "top_k": 3, "detail": "full"}
        full = structured(await c.call_tool("hybrid_search", args))
        top = full["results"]["matches"][0]
        assert top["file"]["path"] == "net/client.py" and top["type"] == "hybrid_match"
        assert top["match"]["span"]["line_start"] == 2 and "ClientSession" in top["match"]["content"]
        assert set(top["match"]["ranks"]) >= {"lexical", "semantic"}
        assert full["metadata"]["index"]["generation"] >= 1

        nl = structured(
            await c.call_tool(
                "hybrid_search",
                {"query": "where do failed calls get retried", "mode": "semantic", "top_k": 3, "detail": "full"},
            )
        )
        assert page_matches(nl)[0]["file"]["path"] == "net/retry.py"
        assert page_matches(nl)[0]["type"] == "semantic_match"


async def test_ranked_results_page_and_filter_before_top_k(repo, tmp_path, model_cache):
    async with Client(build_app(settings_for(repo, tmp_path, model_cache))) as c:
        matches, responses = await walk(
            c, "hybrid_search", {"query": "http session cookies", "top_k": 5, "page_size": 2}
        )
        assert len(responses) == len(range(0, len(matches), 2)) and len(matches) <= 5
        keys = [(m["path"], m["line"]) for m in matches]
        assert len(keys) == len(set(keys))
        scores = [m["score"] for m in matches]
        assert scores == sorted(scores, reverse=True)

        only_web = structured(
            await c.call_tool(
                "hybrid_search", {"query": "client session pool", "top_k": 3, "include_patterns": ["web/**"]}
            )
        )
        assert page_matches(only_web)
        assert {m["path"] for m in page_matches(only_web)} == {"web/cookies.py"}


async def test_a_cursor_pages_its_own_mode_and_refuses_another(repo, tmp_path, model_cache):
    """Both ranked modes are one tool: a cursor pages in the mode it was issued for, `mode` left
    out or sent equal, and a different `mode` sent with it is refused naming it."""
    async with Client(build_app(settings_for(repo, tmp_path, model_cache))) as c:
        for mode, other in (("semantic", "hybrid"), ("hybrid", "semantic")):
            args = {"query": "http session cookies", "mode": mode, "top_k": 4, "page_size": 2}
            first = structured(await c.call_tool("hybrid_search", args))
            cursor = first["pagination"]["next_cursor"]
            assert first["search"]["mode"] == mode and cursor is not None
            left_out = structured(await c.call_tool("hybrid_search", {"cursor": cursor}))
            sent = structured(await c.call_tool("hybrid_search", {"cursor": cursor, "mode": mode}))
            assert left_out["search"]["mode"] == sent["search"]["mode"] == mode
            assert page_matches(left_out) == page_matches(sent)
            refused = await c.call_tool("hybrid_search", {"cursor": cursor, "mode": other}, raise_on_error=False)
            error = structured(refused)["error"]
            assert refused.is_error and error["code"] == "cursor_mismatch" and "`mode`" in error["message"], error
            elsewhere = await c.call_tool("regex_search", {"cursor": cursor}, raise_on_error=False)
            error = structured(elsewhere)["error"]
            assert error["code"] == "invalid_cursor" and "pages a hybrid_search search" in error["message"], error


async def test_index_status_and_reindex_pick_up_changes(repo, tmp_path, model_cache):
    async with Client(build_app(settings_for(repo, tmp_path, model_cache))) as c:
        await c.call_tool("hybrid_search", {"query": "cookies"})
        status = structured(await c.call_tool("index_status", {}))
        assert status["exists"] and status["files"] == 4 and status["chunks"] >= 4 and not status["building"]
        generation = status["generation"]

        (repo / "web" / "csrf.py").write_text(
            'def verify_csrf_token(request):\n    """Reject forged cross-site form posts."""\n'
        )
        after = structured(await c.call_tool("reindex", {}))
        assert after["generation"] == generation + 1 and after["files"] == 5
        found = structured(await c.call_tool("hybrid_search", {"query": "verify_csrf_token", "top_k": 1}))
        assert page_matches(found)[0]["path"] == "web/csrf.py"


async def test_not_ready_answers_with_progress_then_succeeds(repo, tmp_path, model_cache):
    settings = settings_for(repo, tmp_path, model_cache, ready_wait_s=0)
    async with Client(build_app(settings)) as c:
        early = await c.call_tool("hybrid_search", {"query": "cookies", "mode": "semantic"}, raise_on_error=False)
        assert early.is_error
        error = early.structured_content["error"]
        assert error["code"] == "index_not_ready" and "retry" in error["hint"] and "progress" in error
        # regex keeps working meanwhile
        assert structured(await c.call_tool("regex_search", {"pattern": "cookie"}))["results"]["total_count"] > 0


@pytest.mark.slow
async def test_waiting_sends_progress_notifications(tmp_path, model_cache):
    root = tmp_path / "bigger"
    for i in range(150):
        p = root / f"pkg{i % 10}" / f"mod{i}.py"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("\n".join(f"def handler_{i}_{j}(request):\n    return request.path + '{j}'\n" for j in range(20)))
    notes: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append((progress, total, message))

    async with Client(build_app(settings_for(root, tmp_path, model_cache))) as c:
        result = await c.call_tool("hybrid_search", {"query": "request path handler"}, progress_handler=on_progress)
    assert structured(result)["results"]["count"] == 10
    assert notes and all(m and m.startswith("indexing") for _, _, m in notes)
    # Once discovery has listed the files, each notification says how far out of how many.
    counted = [(done, total) for done, total, _ in notes if total is not None]
    assert counted and all(0 <= done <= total for done, total in counted)


async def test_a_cursor_alone_waits_for_the_index_its_restore_needs(repo, tmp_path, model_cache):
    """After a restart a semantic cursor must re-run its search on the index. While that index
    is still being built the call answers 'not ready' in time (not block for the whole build
    behind the indexer), and once it is ready the same cursor continues, restored."""
    async with Client(build_app(settings_for(repo, tmp_path, model_cache))) as first:
        page1 = structured(
            await first.call_tool(
                "hybrid_search", {"query": "retry a failed call", "mode": "semantic", "top_k": 3, "page_size": 1}
            )
        )
        page2 = structured(await first.call_tool("hybrid_search", {"cursor": page1["pagination"]["next_cursor"]}))
    cursor = page1["pagination"]["next_cursor"]
    async with Client(build_app(settings_for(repo, tmp_path, model_cache, ready_wait_s=0))) as restarted:
        early = await restarted.call_tool("hybrid_search", {"cursor": cursor}, raise_on_error=False)
        assert early.is_error and early.structured_content["error"]["code"] == "index_not_ready"
        for _ in range(600):
            # The cursor is a semantic search's: `mode` need not be sent, but if it is, it must agree.
            later = await restarted.call_tool(
                "hybrid_search", {"cursor": cursor, "mode": "semantic"}, raise_on_error=False
            )
            if not later.is_error:
                break
            await anyio.sleep(0.1)
        body = structured(later)
        assert body["metadata"]["cache"] == "restored"
        assert page_matches(body) == page_matches(page2)


async def test_identical_searches_reuse_their_session_unless_regex(repo, tmp_path, model_cache):
    # Index-backed results are pinned to a generation, so an identical search within the TTL is
    # served from its session; regex results have nothing to pin them to, so a repeated regex
    # searches the files as they are now (an agent greps again after editing, and must see it).
    async with Client(build_app(settings_for(repo, tmp_path, model_cache))) as c:
        args = {"query": "retry with backoff", "top_k": 3}
        first = structured(await c.call_tool("hybrid_search", args))
        again = structured(await c.call_tool("hybrid_search", {**args, "page_size": 1}))
        assert (first["metadata"]["cache"], again["metadata"]["cache"]) == ("miss", "hit")
        assert page_matches(again) == page_matches(first)[:1]

        before = structured(await c.call_tool("regex_search", {"pattern": "backoff"}))
        (repo / "net" / "jitter.py").write_text("def backoff_with_jitter():\n    pass\n")
        after = structured(await c.call_tool("regex_search", {"pattern": "backoff"}))
        assert after["metadata"]["cache"] == "miss"
        assert after["results"]["total_count"] == before["results"]["total_count"] + 1


@pytest.mark.parametrize("mode", ["hybrid", "semantic"])
async def test_a_question_the_code_cannot_answer_says_nothing_is_close(repo, tmp_path, model_cache, mode):
    """Issue 37.8: a hybrid answer scores its best result 1.0 whatever it found, so an agent
    asking what the code cannot answer could not tell. Every ranked answer now carries the best
    cosine similarity of the query with the code, and under the calibrated floor (benchmarks/
    relevance.py) says low_relevance, with a warning in structuredContent and the text block."""
    async with Client(build_app(settings_for(repo, tmp_path, model_cache))) as c:
        query = "recipe for a chocolate cake with strawberries"
        result = await c.call_tool("hybrid_search", {"query": query, "mode": mode, "top_k": 3})
        off = structured(result)
        assert off["results"]["low_relevance"] is True
        assert off["results"]["best_similarity"] < STATIC_RELEVANCE_FLOOR
        (warning,) = off["metadata"]["warnings"]
        assert warning.startswith("low relevance: no code is close to the query") and "regex_search" in warning
        assert f"warning: {warning}" in result.content[0].text
        if mode == "hybrid":
            assert page_matches(off)[0]["score"] == 1.0  # the relative score alone says nothing

        on = structured(
            await c.call_tool("hybrid_search", {"query": "retry a failed call with exponential backoff", "mode": mode})
        )
        assert on["results"]["best_similarity"] >= STATIC_RELEVANCE_FLOOR
        assert "low_relevance" not in on["results"] and "warnings" not in on["metadata"]
        regex = structured(await c.call_tool("regex_search", {"pattern": "chocolate"}))
        assert "best_similarity" not in regex["results"]
