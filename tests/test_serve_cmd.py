"""`codepager serve` started by a person in a terminal says what it is waiting for (issue 37.8):
a real `codepager serve` subprocess whose stdin is a pseudo-terminal, and one whose stdin is a
pipe, as an MCP client starts it."""

from __future__ import annotations

import os
import pty
import selectors
import subprocess
import time
from pathlib import Path

import pytest

from harness.commands import codepager_cmd
from tests.code_tree import write_code_tree
from tests.server_helpers import serve_env

HINT = "codepager: MCP server (stdio) waiting for a client on stdin"


def hint_line(proc: subprocess.Popen[bytes], timeout_s: float) -> str:
    """The first line `proc` writes to stderr that starts with "codepager:" (log lines, such as
    a warning about the test's short key, come before it), or "" if none within `timeout_s`."""
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stderr, selectors.EVENT_READ)
        while selector.select(max(deadline - time.monotonic(), 0)):
            line = proc.stderr.readline().decode(errors="replace")
            if not line or line.startswith("codepager:"):
                return line
    return ""


@pytest.mark.slow
def test_serve_in_a_terminal_says_what_it_waits_for_and_how_to_add_it(tmp_path: Path) -> None:
    root = write_code_tree(tmp_path / "repo", files=2)
    cmd, args = codepager_cmd()
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        [cmd, *args, "serve", "--root", str(root)],
        stdin=secondary,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=serve_env(tmp_path),
    )
    os.close(secondary)
    try:
        line = hint_line(proc, 120)
    finally:
        proc.kill()
        proc.wait(30)
        os.close(primary)
    assert line.startswith(HINT), line
    assert f"claude mcp add codepager -- codepager serve --root {root}" in line and line.count("\n") == 1


@pytest.mark.slow
def test_serve_started_by_a_client_prints_no_hint(tmp_path: Path) -> None:
    """stdin is a pipe, closed at once: the server exits, and said nothing meant for a person."""
    root = write_code_tree(tmp_path / "repo", files=2)
    cmd, args = codepager_cmd()
    done = subprocess.run(
        [cmd, *args, "serve", "--root", str(root)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=serve_env(tmp_path),
        timeout=120,
    )
    assert HINT not in done.stderr.decode(errors="replace")
