"""`codepager serve --transport http` as a subprocess on a free loopback port, for tests and
benchmarks that need real replicas (start, kill mid-walk, restart on the same port); and the raw
requests the HTTP attack tests send it (a DNS-rebinding page's calls, bodies that never finish)."""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
from fastmcp import Client

from harness.commands import codepager_cmd
from harness.redis_server import free_port

Auth = Literal["token", "off", "default"]
"""How a harness server is started: "token", with a random token of the harness's
(`HttpServer.token`, passed in the environment: a flag would show it in `ps`); "off", with
`--no-auth`; "default", with neither, as a user starts it (it then makes its own token)."""


class HttpServer:
    def __init__(
        self,
        root: Path,
        env: dict[str, str],
        extra_args: list[str] | None = None,
        subcommand: list[str] | None = None,
        program: list[str] | None = None,
        auth: Auth = "token",
        token: str | None = None,
    ) -> None:
        """`subcommand` replaces `serve --root ROOT` (e.g. `["proxy"]`, with the backend in `extra_args`).
        `program` runs in place of the `codepager` script, with the same arguments (the load
        benchmark runs the server under a harness that samples its session store from inside).
        `token` is the one "token" starts it with (default: a random one). Clients reach it with
        `client()` or `headers`, which carry the token."""
        self.root = root
        self.program = program
        self.subcommand = subcommand or ["serve", "--root", str(root)]
        self.token = (token or secrets.token_urlsafe(24)) if auth == "token" else None
        self.env = {**env, "CODEPAGER_SERVER__AUTH_TOKEN": self.token} if self.token is not None else env
        self.extra_args = [*(["--no-auth"] if auth == "off" else []), *(extra_args or [])]
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc: subprocess.Popen[bytes] | None = None
        # A file, not a pipe: a busy server's log lines would fill a pipe nobody reads and block it.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - open as long as this object: logs span restarts

    def start(self, timeout_s: float = 90) -> HttpServer:
        cmd, args = codepager_cmd()
        self.proc = subprocess.Popen(
            [
                *(self.program or [cmd, *args]),
                *self.subcommand,
                "--transport",
                "http",
                "--port",
                str(self.port),
                *self.extra_args,
            ],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
        )
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

    def client(self, **kwargs: Any) -> Client[Any]:
        """A fastmcp client of this server, with its token; `kwargs` as `Client` takes them."""
        return Client(self.url, auth=self.token, **kwargs)

    @property
    def headers(self) -> dict[str, str]:
        """The MCP headers of a raw request to this server, with its token."""
        return {**MCP_HEADERS, **({"Authorization": f"Bearer {self.token}"} if self.token is not None else {})}

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

    @property
    def pid(self) -> int:
        """The running server's process id."""
        assert self.proc is not None, "the server is not running"
        return self.proc.pid

    def memory_kib(self, field: str) -> int:
        """`VmRSS` (now) or `VmHWM` (peak) of the server process, from /proc, in KiB."""
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
        raise AssertionError(f"no {field} in /proc/{self.proc.pid}/status")

    def reset_peak_memory(self) -> None:
        """Make VmHWM start again from the current RSS."""
        assert self.proc is not None
        Path(f"/proc/{self.proc.pid}/clear_refs").write_text("5")


MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}


def rebinding_attack(
    url: str, host: str, origin: str | None, tool: str, arguments: dict[str, Any]
) -> list[httpx.Response]:
    """What a web page does once its name resolves to the server (DNS rebinding): the browser
    sends its calls with the page's `Host` (and `Origin`). See `raw_tool_call`."""
    return raw_tool_call(url, tool, arguments, {"Host": host, **({"Origin": origin} if origin is not None else {})})


def raw_tool_call(url: str, tool: str, arguments: dict[str, Any], headers: dict[str, str]) -> list[httpx.Response]:
    """What any local process can send the server in three plain HTTP requests, with `headers`:
    initialize, confirm, call `tool`; stops at the first answer that is not a success. Returns
    every answer it got."""
    headers = {**MCP_HEADERS, **headers}
    calls = [
        INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}},
    ]
    answers: list[httpx.Response] = []
    for call in calls:
        answers.append(httpx.post(url, json=call, headers=headers, timeout=30))
        if not answers[-1].is_success:
            break
        if "mcp-session-id" in answers[-1].headers:
            headers["mcp-session-id"] = answers[-1].headers["mcp-session-id"]
    return answers


def unfinished_post(
    port: int, headers: dict[str, str], first: bytes, content_length: int | None = None
) -> socket.socket:
    """A POST to /mcp whose body never finishes: the headers and the first bytes of the body
    (`first`, as one chunk of a chunked body, or the start of a `content_length` one) are sent,
    and nothing more. A raw socket, not httpx: an HTTP/1.1 client library writes the whole body
    before it reads an answer, so it cannot show one that comes while the body is unfinished."""
    length = {"Content-Length": str(content_length)} if content_length is not None else {"Transfer-Encoding": "chunked"}
    head = {"Host": f"127.0.0.1:{port}", **MCP_HEADERS, **length, **headers}
    request = "POST /mcp HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head.items()) + "\r\n"
    body = first if content_length is not None else b"%x\r\n%s\r\n" % (len(first), first)
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(request.encode() + body)
    return sock


def send_more_chunks(sock: socket.socket, total: int, chunk: int = 65536) -> int:
    """Keep sending a chunked body (`total` bytes more, never its end); returns how much the
    server took before it closed the connection (all of it if it never did)."""
    sent = 0
    try:
        while sent < total:
            sock.sendall(b"%x\r\n%s\r\n" % (chunk, b"x" * chunk))
            sent += chunk
    except OSError:  # the server closed the connection: what the checks before the body do
        pass
    return sent


@dataclass
class RawAnswer:
    status: int
    headers: dict[str, str]
    body: bytes
    seconds: float  # from the call to read_answer to the answer's last byte
    closed: bool  # the server closed the connection after the answer

    def json(self) -> Any:
        return json.loads(self.body)


def read_answer(sock: socket.socket, timeout: float) -> RawAnswer | None:
    """The HTTP answer on `sock` (status, headers, a Content-Length body), or None if none came
    within `timeout` seconds; then whether the server closed the connection (within 5 s more)."""
    start = time.monotonic()
    data = b""
    sock.settimeout(timeout)
    try:
        while b"\r\n\r\n" not in data or len(data) < _answer_length(data):
            piece = sock.recv(65536)
            if not piece:
                break
            data += piece
    except TimeoutError:
        return None
    seconds = time.monotonic() - start
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
    sock.settimeout(5)
    try:
        closed = sock.recv(1) == b""
    except TimeoutError:
        closed = False
    except ConnectionResetError:
        closed = True
    return RawAnswer(int(status_line.split()[1]), headers, body, seconds, closed)


def _answer_length(data: bytes) -> int:
    head, _, _ = data.partition(b"\r\n\r\n")
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            return len(head) + 4 + int(value)
    return len(data) + 1  # no length: read to the end of the connection
