"""A streamable-HTTP MCP server written by hand (plain JSON replies, no session), so it can send
what a fastmcp server never would: a tool list holding malformed definitions, and a tool result
of any size as plain JSON, gzip-compressed JSON, JSON under an odd content type or one
server-sent event. Run as `python raw_http_backend.py [LOG]`: it prints its port, then serves
until killed, appending the Authorization headers of each request to LOG as a JSON list.

`lines` answers `{"bytes": N}` with N // 48 lines of text; `"sse": true`, `"gzip": true` and
`"ctype": TYPE` choose how the reply is sent. Any other tool answers "called NAME".
"""

from __future__ import annotations

import contextlib
import gzip
import json
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

#: Two tools no protocol version accepts among good ones.
TOOLS = [
    {"name": "good", "inputSchema": {"type": "object"}},
    {"name": "bad_required", "inputSchema": {"type": "object", "required": "x"}},
    {"name": "no_schema"},
    {"name": "also_good", "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
    {"name": "lines", "inputSchema": {"type": "object"}},
]


@contextlib.contextmanager
def raw_http_backend(log: Path | None = None) -> Iterator[str]:
    """The URL of this server, running in a subprocess for the duration (headers to `log`)."""
    args = [sys.executable, str(Path(__file__).resolve()), *([str(log)] if log is not None else [])]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield f"http://127.0.0.1:{int(process.stdout.readline())}/mcp"
    finally:
        process.kill()
        process.wait()


def _result(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    if method == "initialize":
        return {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw-http", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call" and params["name"] == "lines":
        n = params["arguments"]["bytes"] // 48
        return {"content": [{"type": "text", "text": "\n".join(f"line {i:08d} " + "x" * 34 for i in range(n))}]}
    if method == "tools/call":
        return {"content": [{"type": "text", "text": "called " + params["name"]}]}
    if method == "ping":
        return {}
    return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: Any = None

    def log_message(self, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: bytes = b"", kind: str = "application/json", encoding: str = "") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        if encoding:
            self.send_header("Content-Encoding", encoding)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._reply(405)

    def do_DELETE(self) -> None:
        self._reply(405)

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.seen is not None:
            self.seen.write(json.dumps(self.headers.get_all("Authorization") or []) + "\n")
            self.seen.flush()
        if "id" not in message:
            return self._reply(202)
        params = message.get("params") or {}
        result = _result(message["method"], params)
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        if result is None:
            body["error"] = {"code": -32601, "message": "method not found: " + message["method"]}
        else:
            body["result"] = result
        data = json.dumps(body).encode()
        arguments = (params.get("arguments") or {}) if message["method"] == "tools/call" else {}
        kind = arguments.get("ctype", "application/json")
        if arguments.get("sse"):
            self._reply(200, b"event: message\ndata: " + data + b"\n\n", "text/event-stream")
        elif arguments.get("gzip"):
            self._reply(200, gzip.compress(data), kind, "gzip")
        else:
            self._reply(200, data, kind)


if __name__ == "__main__":
    _Handler.seen = open(sys.argv[1], "a") if len(sys.argv) > 1 else None  # noqa: SIM115 - open while serving
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
