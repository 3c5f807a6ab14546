"""HTTP is secure by default. `serve --transport http` used to bind loopback with no token, so
another user of the machine, who could not open the repository's directory (0700), read its
`AWS_SECRET_ACCESS_KEY` through `regex_search` over plain HTTP; `proxy --transport http` handed
out its backend's tools the same way. Now a token is generated at first start, kept 0600 in the
user's state dir (`http-token` there, its directory 0700), printed on stderr in the
`claude mcp add ... --header` line that connects a client, and reused at every start until the
file is deleted; a request without it gets 401. Opting out takes `--no-auth`, warned about."""

from __future__ import annotations

import argparse
import logging
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastmcp import Client, FastMCP

from harness.http_server import HttpServer, raw_tool_call
from harness.proxy_backend import BACKEND_SCRIPT as BACKEND
from infra import UnsafeDirectoryError
from server.auth_token import bearer_token, how_to_connect, token_file
from server.cli import serve_cmd
from server.settings import ServerSettings, load_settings
from tests.server_helpers import serve_env

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def secret_repo(root: Path) -> Path:
    """A repository holding a credential, private to its owner."""
    (root / "deploy").mkdir(parents=True)
    (root / "deploy" / "settings.py").write_text(f'AWS_SECRET_ACCESS_KEY = "{AWS_SECRET}"\n')
    root.chmod(0o700)
    return root


def printed_token(server: HttpServer, name: str) -> str:
    """The token in the last `claude mcp add` line the server printed on stderr, which must be
    exactly the command that connects a client to it."""
    lines = [line for line in server.stderr().splitlines() if "claude mcp add" in line]
    assert lines, server.stderr()
    expected = (
        rf'  claude mcp add --transport http {name} {re.escape(server.url)} --header "Authorization: Bearer (\S+)"'
    )
    found = re.fullmatch(expected, lines[-1])
    assert found is not None, lines[-1]
    return found.group(1)


def statuses(answers: list[httpx.Response]) -> list[int]:
    return [a.status_code for a in answers]


@pytest.mark.slow  # a real server process, started twice
def test_a_local_user_without_the_token_cannot_read_the_code_over_http(tmp_path: Path) -> None:
    root = secret_repo(tmp_path / "repo")
    server = HttpServer(root, serve_env(tmp_path), auth="default").start()  # as a user starts it: no token given
    try:
        stolen = raw_tool_call(server.url, "regex_search", {"pattern": "AWS_SECRET_ACCESS_KEY"}, {})
        assert statuses(stolen) == [401], [a.text[:300] for a in stolen]
        assert AWS_SECRET not in "".join(a.text for a in stolen)
        assert "requires a bearer token" in stolen[0].json()["error"]["message"]

        token = printed_token(server, "codepager")
        kept = tmp_path / "state" / "codepager" / "http-token"  # in serve_env's XDG_STATE_HOME
        assert kept.read_text().strip() == token and len(token) >= 32
        assert mode(kept) == 0o600 and mode(kept.parent) == 0o700
        owner = raw_tool_call(server.url, "regex_search", {"pattern": "AWS_SECRET_ACCESS_KEY"}, bearer(token))
        assert statuses(owner) == [200, 202, 200] and AWS_SECRET in owner[-1].text

        server.stop()
        server.start()  # a restart: the client registered with the token keeps working
        assert printed_token(server, "codepager") == token
        assert statuses(raw_tool_call(server.url, "index_status", {}, bearer(token))) == [200, 202, 200]
        assert statuses(raw_tool_call(server.url, "index_status", {}, bearer(token + "x"))) == [401]
    finally:
        server.stop()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.slow  # a real proxy process and its backend
async def test_a_local_user_without_the_token_cannot_call_the_proxied_backend_over_http(tmp_path: Path) -> None:
    args = ["--data-dir", str(tmp_path / "data"), "--", sys.executable, BACKEND]
    server = HttpServer(tmp_path, serve_env(tmp_path), extra_args=args, subcommand=["proxy"], auth="default").start()
    try:
        stolen = raw_tool_call(server.url, "small", {"name": "neighbour"}, {})
        assert statuses(stolen) == [401], [a.text[:300] for a in stolen]
        assert "hello neighbour" not in "".join(a.text for a in stolen)

        token = printed_token(server, "codepager-proxy")
        assert (tmp_path / "state" / "codepager" / "http-token").read_text().strip() == token
        async with Client(server.url, auth=token, timeout=60) as client:
            assert "small" in {tool.name for tool in await client.list_tools()}
            assert (await client.call_tool_mcp("small", {"name": "owner"})).content[0].text == "hello owner"
    finally:
        log = server.stop()
    assert "Traceback" not in log, log


@pytest.mark.slow  # a real server process
def test_no_auth_serves_everyone_and_says_so_on_stderr(tmp_path: Path) -> None:
    root = secret_repo(tmp_path / "repo")
    server = HttpServer(root, serve_env(tmp_path), auth="off").start()
    try:
        open_door = raw_tool_call(server.url, "regex_search", {"pattern": "AWS_SECRET_ACCESS_KEY"}, {})
        assert statuses(open_door) == [200, 202, 200] and AWS_SECRET in open_door[-1].text  # what was asked for
    finally:
        log = server.stop()
    assert "--no-auth: serving HTTP without a token: every user of this machine can call the tools" in log, log
    assert "claude mcp add" not in log
    assert not (tmp_path / "state").exists()


# -- where the token comes from (in-process) ---------------------------------------------------


@pytest.fixture(autouse=True)
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user state dir, where the token is kept: the test's (tmp_path/state/codepager)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def http(tmp_path: Path, **settings: Any) -> ServerSettings:
    return ServerSettings(transport="http", **settings)


def test_the_token_is_generated_once_kept_0600_and_reused_until_the_file_is_deleted(tmp_path: Path) -> None:
    settings = http(tmp_path)
    first = bearer_token(settings)
    assert first is not None and first.shown
    kept = token_file()
    assert kept == tmp_path / "state" / "codepager" / "http-token"  # the user state dir, XDG_STATE_HOME's
    assert kept.read_text().strip() == first.value and mode(kept) == 0o600 and mode(kept.parent) == 0o700
    assert [p.name for p in kept.parent.iterdir()] == ["http-token"]  # no temporary file left behind
    again = bearer_token(settings)
    assert again is not None and again.value == first.value  # a restart
    assert how_to_connect(settings, "codepager", first).splitlines() == [
        f"codepager: HTTP requests need this server's token, kept in {kept} (delete that file and restart to "
        "rotate it). Connect a client with:",
        f'  claude mcp add --transport http codepager http://127.0.0.1:8765/mcp --header "Authorization: Bearer '
        f'{first.value}"',
    ]
    kept.unlink()  # rotation, as the line says
    rotated = bearer_token(settings)
    assert rotated is not None and rotated.value != first.value and kept.read_text().strip() == rotated.value


def test_a_configured_token_wins_is_not_printed_and_writes_nothing(tmp_path: Path) -> None:
    settings = http(tmp_path, auth_token="configured-token-0123456789", host="::1", port=9000)
    token = bearer_token(settings)
    assert token is not None and token.value == "configured-token-0123456789"
    line = how_to_connect(settings, "codepager", token)
    assert "configured-token" not in line and "set in server.auth_token (--auth-token)" in line
    assert 'http://[::1]:9000/mcp --header "Authorization: Bearer <token>"' in line
    assert not (tmp_path / "state").exists()


def test_a_token_file_planted_as_a_link_or_a_fifo_is_refused_saying_what_to_do(tmp_path: Path) -> None:
    settings = http(tmp_path)
    token_file().parent.mkdir(parents=True, mode=0o700)
    known = tmp_path / "known"
    known.write_text("a-token-its-planter-knows-0123456789\n")
    token_file().symlink_to(known)
    with pytest.raises(ValueError, match="not a link; delete it to have a new token generated"):
        bearer_token(settings)
    token_file().unlink()
    os.mkfifo(token_file())
    with pytest.raises(ValueError, match="not a regular file of this user's"):
        bearer_token(settings)


def test_a_token_dir_others_can_write_in_is_tightened_and_another_users_is_refused(tmp_path: Path) -> None:
    settings = http(tmp_path)
    directory = token_file().parent
    directory.mkdir(parents=True)
    directory.chmod(0o777)
    assert bearer_token(settings) is not None
    assert mode(directory) == 0o755  # nobody else can plant or replace the token any more
    if os.geteuid() != 0:
        pytest.skip("giving the directory to another user needs root")
    os.chown(directory, 4242, 4242)
    with pytest.raises(UnsafeDirectoryError, match="belongs to another user"):
        bearer_token(settings)


def test_a_token_that_cannot_be_kept_is_made_for_this_process_only(tmp_path: Path, caplog) -> None:
    (tmp_path / "state").write_text("a file where the state dir should be\n")
    settings = http(tmp_path)
    with caplog.at_level(logging.WARNING, logger="server.auth_token"):
        token = bearer_token(settings)
    assert token is not None and len(token.value) >= 32  # still no open door
    assert "for this process only" in caplog.text and "for this process only" in how_to_connect(settings, "x", token)


def test_the_no_auth_flag_opts_out_with_a_warning_and_refuses_a_token_beside_it(tmp_path: Path, caplog) -> None:
    parser = argparse.ArgumentParser()
    serve_cmd.register(parser.add_subparsers())
    args = parser.parse_args(["serve", "--transport", "http", "--no-auth"])
    settings = load_settings(None, serve_cmd.server_overrides(args)).server
    with caplog.at_level(logging.WARNING, logger="server.auth_token"):
        assert settings.no_auth and bearer_token(settings) is None
    assert "--no-auth: serving HTTP without a token: every user of this machine" in caplog.text
    assert "anyone who can reach" not in caplog.text  # bound to loopback
    with pytest.raises(ValueError, match="contradict each other"):
        http(tmp_path, no_auth=True, auth_token="configured-token-0123456789")


def test_serve_refuses_to_start_on_a_bad_token_file_saying_why(tmp_path: Path, capsys) -> None:
    settings = http(tmp_path)
    token_file().parent.mkdir(parents=True, mode=0o700)
    token_file().write_text("\n")  # empty: damaged
    assert serve_cmd.serve_app(FastMCP("codepager"), settings) == 2
    err = capsys.readouterr().err
    assert "is empty or damaged; delete it to have a new token generated" in err and "claude mcp add" not in err
