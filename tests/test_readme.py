"""The README's demo works as shown: its commands run with the installed `codepager`, print
exactly the output the README shows, and both MCP configurations start a server that answers
the MCP initialize handshake over stdio and serves the same search.

Blocks are found by the HTML comment above them: `readme-demo` (bash, run in order in one
shell, so `cd` carries over), `readme-output` (the stdout of the demo block before it),
`readme-mcp-command` (a `claude mcp add NAME -- COMMAND...` line) and `readme-mcp-json` (an
`mcpServers` file)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from tests.readme_blocks import README, blocks
from tests.server_helpers import page_matches

SEPARATOR = "@@readme-block-done@@"


def test_the_install_block_stays_first():
    """.ci/run executes the README's first fenced block; the demo must not take its place."""
    first = re.search(r"```\w*\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert first is not None and first[1] == 'pip install -e ".[dev]"\npytest\n'


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    """The user's environment as the README assumes it: `codepager` on PATH (the installed
    console script next to this interpreter), temp files and caches in this test's folders."""
    home = tmp_path_factory.mktemp("readme")
    cache = home / "cache"
    cache.mkdir()
    return {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "TMPDIR": str(home),
        "CODEPAGER_INDEX__CACHE_DIR": str(cache),
        "CODEPAGER_OFFLOAD__OUTPUT_DIR": str(home / "offload"),
        "HF_HUB_OFFLINE": "1",
    }


@pytest.fixture(scope="module")
def demo(env) -> tuple[Path, list[str]]:
    """Run the demo blocks as one shell script; returns (the directory it ended in, the stdout
    of each block)."""
    demo_blocks = [body for kind, body in blocks() if kind == "readme-demo"]
    assert len(demo_blocks) >= 2, "the README lost its demo"
    script = "".join(f"{body}\necho {SEPARATOR}\n" for body in demo_blocks) + 'echo "$PWD"\n'
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        env=env,
        cwd=env["TMPDIR"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    *outputs, last = done.stdout.split(f"{SEPARATOR}\n")
    return Path(last.strip()), outputs


@pytest.mark.slow
def test_demo_prints_what_the_readme_shows(demo):
    _, outputs = demo
    expected: list[str | None] = []
    for kind, body in blocks():
        if kind == "readme-demo":
            expected.append(None)
        elif kind == "readme-output":
            expected[-1] = body
    shown = [(got, want) for got, want in zip(outputs, expected, strict=True) if want is not None]
    assert len(shown) >= 2
    for got, want in shown:
        assert got == want


def claude_argv(line: str, cwd: Path, env: dict[str, str]) -> list[str]:
    """The arguments `claude` gets from the README's `claude mcp add ...` line, expanded by bash
    in `cwd` with `env` exactly as in the user's shell (`claude` stubbed to print them)."""
    stub = "claude() { printf '%s\\0' \"$@\"; }\n"
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", stub + line], cwd=cwd, env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\0")[:-1]


def serve_command(kind: str, body: str, cwd: Path, env: dict[str, str]) -> list[str]:
    """The server command line a client would launch from this README block."""
    if kind == "readme-mcp-command":
        words = claude_argv(body, cwd, env)
        assert words[:2] == ["mcp", "add"] and "--" in words
        argv = words[words.index("--") + 1 :]
        assert Path(argv[0]).is_absolute(), "the README's command must record codepager's absolute path"
    else:
        server = json.loads(body)["mcpServers"]["codepager"]
        argv = [server["command"], *server["args"]]
    found = shutil.which(argv[0], path=env["PATH"])
    assert found, f"{argv[0]} is not on PATH"
    return [found, *argv[1:]]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["readme-mcp-command", "readme-mcp-json"])
async def test_mcp_config_starts_a_server_that_answers_initialize(kind, demo, env):
    directory, _ = demo
    ((_, body),) = blocks(kind)
    command, *args = serve_command(kind, body, directory, env)
    transport = StdioTransport(command, args, env=env, cwd=str(directory))
    async with Client(transport, mode="legacy", timeout=120) as client:
        assert client.initialize_result is not None
        assert client.initialize_result.server_info.name == "codepager"
        tools = {t.name for t in await client.list_tools()}
        assert {"regex_search", "hybrid_search"} <= tools
        page = (await client.call_tool("regex_search", {"pattern": r"def \w+"})).structured_content
    hits = [f"{m['path']}:{m['line']}:{m['text']}" for m in page_matches(page)]
    (_, cli_output), *_ = blocks("readme-output")  # `codepager search 'def \w+' .`, checked above
    assert hits == cli_output.splitlines()
