"""`codepager proxy` as a command: argument errors, mcpServers configs, and a real
`codepager proxy --servers mcp.json` process proxying two servers under their own names."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from harness.commands import codepager_cmd
from harness.proxy_backend import BACKEND_SCRIPT as BACKEND
from server.cli import main
from server.proxy import config_backends
from tests.proxy_helpers import stdio_transport
from tests.server_helpers import serve_env, structured


def write_config(path: Path, **servers: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["proxy"], "either `-- COMMAND"),
        (["proxy", "--servers", "x.json", "--", "server"], "either `-- COMMAND"),
        (["proxy", "--servers", "/nonexistent/mcp.json"], "MCP config not found"),
        (["proxy", "--threshold-tokens", "0", "--", "server"], "threshold_tokens"),
        (["proxy", "--", "/nonexistent/mcp-server", "--stdio"], "backend command not found"),
    ],
)
def test_bad_invocations_exit_2_with_a_reason(argv: list[str], message: str, capsys) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_an_empty_or_malformed_config_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no servers"):
        config_backends(write_config(tmp_path / "empty.json"))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a valid mcpServers config"):
        config_backends(tmp_path / "bad.json")


def test_a_refused_config_says_what_is_wrong_without_echoing_its_secrets(tmp_path: Path, capsys) -> None:
    """A server's env and headers hold tokens, and the error lands in terminals and bug reports."""
    config = write_config(
        tmp_path / "mcp.json",
        files={"command": "npx", "args": "not-a-list", "env": {"GITHUB_TOKEN": "ghp_sekrit"}},
        remote={"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer sekrit-2"}, "timeout": "soon"},
    )
    assert main(["proxy", "--servers", str(config)]) == 2
    err = capsys.readouterr().err
    assert "mcpServers.files.StdioMCPServer.args: Input should be a valid array" in err
    assert "mcpServers.remote.RemoteMCPServer.timeout" in err
    assert "sekrit" not in err and "errors.pydantic.dev" not in err
    (tmp_path / "bad.json").write_text('{"mcpServers": {"x": {"command": "npx",}}}')
    assert main(["proxy", "--servers", str(tmp_path / "bad.json")]) == 2
    assert "is not a valid mcpServers config: Invalid JSON: " in capsys.readouterr().err


@pytest.mark.parametrize(
    "entry",
    [
        {"url": "http://127.0.0.1:9/mcp", "tools": {"lines": {"description": "renamed"}}},
        {"command": sys.executable, "args": ["-m", "pkg"], "include_tags": ["a"]},
    ],
    ids=["remote", "stdio"],
)
def test_a_server_with_fastmcps_tool_transforms_is_refused(tmp_path: Path, entry: dict[str, object]) -> None:
    """Found by a review: an entry with `tools`, `include_tags` or `exclude_tags` is run by
    fastmcp behind an inner proxy of its own, outside codepager's backend connection: it sent
    the proxy's own bearer token on to the backend, read a stdio backend's replies unbounded
    and listed its tools unchecked. Such an entry is refused, saying what to remove."""
    config = write_config(tmp_path / "mcp.json", transformed=entry)
    with pytest.raises(ValueError, match="'transformed' uses fastmcp's tool transforms") as refused:
        config_backends(config)
    assert "remove them from its entry" in str(refused.value)


def test_config_servers_keep_their_names_env_and_timeouts(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CODEPAGER_TEST_INHERITED", "yes")
    config = write_config(
        tmp_path / "mcp.json",
        files={"command": sys.executable, "args": ["-m", "pkg"], "env": {"TOKEN": "t"}, "timeout": 1500},
        remote={"url": "http://127.0.0.1:9/mcp"},
    )
    files, remote = config_backends(config, timeout_s=60)
    assert (files.name, files.timeout_s, remote.name, remote.timeout_s) == ("files", 1.5, "remote", 60)
    env = stdio_transport(files).env
    assert env is not None and env["TOKEN"] == "t" and env["CODEPAGER_TEST_INHERITED"] == "yes"


@pytest.mark.slow
async def test_a_real_proxy_process_serves_two_configured_servers(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "mcp.json",
        alpha={"command": sys.executable, "args": [BACKEND]},
        beta={"command": sys.executable, "args": [BACKEND]},
    )
    cmd, args = codepager_cmd()
    argv = [
        *args,
        "proxy",
        "--servers",
        str(config),
        "--data-dir",
        str(tmp_path / "data"),
        "--threshold-tokens",
        "1000",
    ]
    async with Client(StdioTransport(cmd, argv, env=serve_env(tmp_path)), timeout=120, init_timeout=120) as c:
        names = {t.name for t in await c.list_tools()}
        assert {"alpha_records", "beta_records", "analyze-with-duckdb", "read-dataset-page"} <= names
        body = structured(await c.call_tool("beta_records", {"n": 500}))
        assert (body["dataset"]["server"], body["dataset"]["tool"], body["dataset"]["record_count"]) == (
            "beta",
            "records",
            500,
        )
        assert (await c.call_tool("alpha_small", {})).structured_content["greeting"] == "hello world"
    assert Path(body["dataset"]["data_path"]).is_relative_to(tmp_path / "data" / "datasets")


def test_flags_win_over_environment_over_toml(tmp_path: Path, monkeypatch) -> None:
    from server.cli import build_parser
    from server.cli.proxy_cmd import proxy_overrides
    from server.settings import load_settings

    toml = tmp_path / "codepager.toml"
    toml.write_text('[proxy]\nthreshold_tokens = 111\ncleanup_after_days = 7\nexcluded_tools = ["a"]\n')
    monkeypatch.setenv("CODEPAGER_PROXY__CLEANUP_AFTER_DAYS", "9")
    args = build_parser().parse_args(["proxy", "--config", str(toml), "--threshold-tokens", "222", "--", "srv"])
    settings = load_settings(args.config, proxy_overrides(args))
    assert (settings.proxy.threshold_tokens, settings.proxy.cleanup_after_days, settings.proxy.excluded_tools) == (
        222,
        9,
        ["a"],
    )
