"""Many replicas, one Redis: two real `codepager serve --transport http` processes sharing one
redis-server and one secret serve one page walk between them, survive one of them crashing
mid-walk, and ride out Redis itself going away and coming back. A replica rooted elsewhere
refuses a cursor even though it holds the cursor's session."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from harness.http_server import HttpServer
from harness.redis_server import RedisServer
from tests.code_tree import write_code_tree
from tests.hostile_helpers import refused_async
from tests.server_helpers import cli_full_list, page_matches, serve_env, structured

#: A Redis database per call of `replica_env`, for replicas sharing nothing with other tests on
#: the session's redis-server (0 is the namespaced stores', 1 and 2 test_live_pages's).
_DATABASES = itertools.count(3)


def replica_env(tmp: Path, redis_url: str) -> dict[str, str]:
    env = serve_env(tmp)
    env["CODEPAGER_SESSIONS__BACKEND"] = f"{redis_url.removesuffix('/0')}/{next(_DATABASES)}"
    return env


async def call(server: HttpServer, args: dict[str, Any]) -> Any:
    """One call on a fresh connection, as an agent reconnecting between pages would."""
    async with server.client() as client:
        return await client.call_tool("regex_search", args, raise_on_error=False)


def positions(responses: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(m["path"], m["line"]) for r in responses for m in page_matches(r)]


@pytest.mark.slow
async def test_two_replicas_share_a_walk_and_a_crashed_replica_loses_nothing(code_tree, tmp_path, redis_server):
    env = replica_env(tmp_path, redis_server.url)
    a, b = HttpServer(code_tree, env).start(), HttpServer(code_tree, env).start()
    try:
        responses = [structured(await call(a, {"pattern": "needle", "page_size": 30}))]
        order: list[HttpServer | str] = [b, a, b, "kill a", b, "restart a", a, b, a]
        for step in order:
            if step == "kill a":
                a.kill()
                continue
            if step == "restart a":
                a.start()
                continue
            cursor = responses[-1]["pagination"]["next_cursor"]
            if cursor is None:
                break
            assert isinstance(step, HttpServer)
            responses.append(structured(await call(step, {"cursor": cursor})))
        assert responses[-1]["pagination"]["next_cursor"] is None
        # Every page after the first came from the session in Redis, whichever replica served it:
        # nothing was re-searched, nothing restored.
        assert [r["metadata"]["cache"] for r in responses] == ["miss"] + ["hit"] * (len(responses) - 1)
        assert positions(responses) == cli_full_list(code_tree, "needle")
    finally:
        a.stop()
        b.stop()


@pytest.mark.slow
async def test_redis_down_mid_walk_is_a_clear_error_and_paging_recovers(code_tree, tmp_path):
    redis_srv = RedisServer(tmp_path / "redis").start()
    env = replica_env(tmp_path, redis_srv.url)
    server = HttpServer(code_tree, env).start()
    try:
        first = structured(await call(server, {"pattern": "needle", "page_size": 100}))
        cursor = first["pagination"]["next_cursor"]
        redis_srv.stop()
        for args in ({"cursor": cursor}, {"pattern": "needle_3"}):
            result = await call(server, args)
            assert result.is_error
            error = result.structured_content["error"]
            assert error["code"] == "session_store_unavailable"
            backend = env["CODEPAGER_SESSIONS__BACKEND"]
            assert error["message"].startswith(f"session store unavailable: Redis at {backend}")
            assert "retry" in error["hint"]
        redis_srv.start()  # empty (no persistence): the cursor's session is rebuilt, proven identical
        rest = [structured(await call(server, {"cursor": cursor}))]
        assert rest[0]["metadata"]["cache"] == "restored"
        while (nxt := rest[-1]["pagination"]["next_cursor"]) is not None:
            rest.append(structured(await call(server, {"cursor": nxt})))
        assert positions([first, *rest]) == cli_full_list(code_tree, "needle")
    finally:
        server.stop()
        redis_srv.stop()


@pytest.mark.slow
async def test_a_replica_rooted_elsewhere_refuses_a_cursor_whose_session_it_shares(tmp_path, redis_server):
    """Same secret, same Redis, other roots: the session behind the cursor is one Redis read away
    on replica B, yet B must not page a search of a root it does not serve."""
    env = replica_env(tmp_path, redis_server.url)
    a_root = write_code_tree(tmp_path / "a")
    b_root = tmp_path / "b"
    b_root.mkdir()
    (b_root / "other.py").write_text("needle = 'b'\n")
    a, b = HttpServer(a_root, env).start(), HttpServer(b_root, env).start()
    try:
        first = structured(await call(a, {"pattern": "needle", "page_size": 30}))
        cursor = first["pagination"]["next_cursor"]
        async with b.client() as client:
            message = await refused_async(client, "regex_search", {"cursor": cursor})
        assert "outside the allowed roots" in message and str(b_root.resolve()) in message
        assert str(a_root.resolve()) not in message  # the cursor's own root stays sealed
        assert structured(await call(a, {"cursor": cursor}))["metadata"]["cache"] == "hit"
    finally:
        a.stop()
        b.stop()


def test_an_unknown_backend_is_refused_at_start(tmp_path):
    from server.app import session_store
    from server.settings import SessionSettings

    with pytest.raises(ValueError, match="must be 'memory' or a redis://"):
        session_store(SessionSettings(backend="memcached://x"))
