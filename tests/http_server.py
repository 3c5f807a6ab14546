"""`codepager serve --transport http` as a subprocess on a free loopback port, for tests and
benchmarks that need real replicas (start, kill mid-walk, restart on the same port)."""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from tests.redis_server import free_port
from tests.server_helpers import codepager_cmd


class HttpServer:
    def __init__(
        self,
        root: Path,
        env: dict[str, str],
        extra_args: list[str] | None = None,
        subcommand: list[str] | None = None,
        program: list[str] | None = None,
    ) -> None:
        """`subcommand` replaces `serve --root ROOT` (e.g. `["proxy"]`, with the backend in `extra_args`).
        `program` runs in place of the `codepager` script, with the same arguments (the load
        benchmark runs the server under a harness that samples its session store from inside)."""
        self.root = root
        self.program = program
        self.subcommand = subcommand or ["serve", "--root", str(root)]
        self.env = env
        self.extra_args = extra_args or []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc: subprocess.Popen[bytes] | None = None
        # A file, not a pipe: a busy server's log lines would fill a pipe nobody reads and block it.
        self._stderr = tempfile.TemporaryFile()

    def start(self, timeout_s: float = 90) -> HttpServer:
        cmd, args = codepager_cmd()
        self.proc = subprocess.Popen(
            [*(self.program or [cmd, *args]), *self.subcommand, "--transport", "http", "--port", str(self.port), *self.extra_args],
            env=self.env, stdout=subprocess.DEVNULL, stderr=self._stderr,
        )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.stderr()}")
            try:
                httpx.get(self.url, timeout=1)
                return self
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"server did not listen on {self.url} within {timeout_s} s") from None
                time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL: no shutdown handlers run, as when a replica crashes."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None

    def stop(self) -> str:
        """SIGTERM and wait; returns what the server wrote to stderr."""
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        return self.stderr()

    def stderr(self) -> str:
        """Everything the server processes (across restarts) wrote to stderr so far."""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")
