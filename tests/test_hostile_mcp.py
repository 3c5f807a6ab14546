"""Broken MCP traffic against a real `codepager serve` stdio process, driven with raw JSON lines
(a client library would refuse to send most of these): not JSON, not JSON-RPC, batches, invalid
UTF-8, lone surrogates, unknown methods and tools, wrong argument types, a 20 MB request. Each
gets a proper JSON-RPC error (with the request's id when it has a readable one, so no client
waits forever), and the same process answers a good call after every one of them."""

from __future__ import annotations

import json
import select
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.server_helpers import codepager_cmd, serve_env

GOOD_CALL = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "regex_search", "arguments": {"pattern": "needle"}}}


class RawStdio:
    def __init__(self, root: Path, tmp: Path) -> None:
        cmd, args = codepager_cmd()
        self.proc = subprocess.Popen(
            [cmd, *args, "serve", "--root", str(root)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=serve_env(tmp),
        )  # fmt: skip
        self.next_id = 1000

    def send(self, line: bytes | dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        data = line if isinstance(line, bytes) else json.dumps(line).encode()
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def receive(self, timeout: float = 30) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, "no answer: the server dropped the message"
        return json.loads(self.proc.stdout.readline())

    def good_call_works(self) -> None:
        self.next_id += 1
        self.send({**GOOD_CALL, "id": self.next_id})
        answer = self.receive()
        assert answer["id"] == self.next_id and answer["result"]["structuredContent"]["results"]["count"] == 1

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("raw-mcp")
    root = tmp / "repo"
    root.mkdir()
    (root / "a.txt").write_text("needle\n")
    raw = RawStdio(root, tmp)
    raw.send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})  # fmt: skip
    assert raw.receive(timeout=90)["id"] == 1
    raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    yield raw
    raw.close()
    assert raw.proc.returncode == 0


CALL = '{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"regex_search","arguments":ARGS}}'


@pytest.mark.parametrize(
    ("line", "code", "request_id"),
    [
        (b"this is not json", -32700, None),
        (b'{"jsonrpc":"2.0","id":2,', -32700, None),
        (b"\xff\xfe{garbage", -32700, None),
        (b"[" * 100_000 + b"]" * 100_000, -32700, None),
        (b"[1,2,3]", -32600, None),
        (b'[{"jsonrpc":"2.0","id":3,"method":"tools/list"}]', -32600, None),
        (b'{"jsonrpc":"2.0","id":4}', -32600, 4),
        (b'{"jsonrpc":"1.0","id":5,"method":"tools/list"}', -32600, 5),
        (b'{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}', -32600, None),
        (b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"\\ud800","arguments":{}}}', -32600, 6),
        (CALL.replace("ID", "7").replace("ARGS", '{"pattern":"\\udc00x"}').encode(), -32600, 7),
        (b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/list"}', -32600, None),
        (b'{"jsonrpc":"2.0","id":8,"method":"no/such/method"}', -32601, 8),
        (b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}', -32602, 9),
        (CALL.replace("ID", "10").replace("ARGS", '{"pattern":5}').encode(), -32602, 10),
        (CALL.replace("ID", "11").replace("ARGS", '"not an object"').encode(), -32602, 11),
        (CALL.replace("ID", "12").replace("ARGS", '{"pattern":"x","page_size":"ten"}').encode(), -32602, 12),
        (CALL.replace("ID", "13").replace("ARGS", '{"pattern":"x","nonsense":1}').encode(), -32602, 13),
        (CALL.replace("ID", "14").replace("ARGS", '{"cursor":"garbage"}').encode(), -32602, 14),
        (b'{"jsonrpc":"2.0","id":15,"method":"tools/call","params":"x"}', -32600, 15),
    ],
    ids=lambda v: None if isinstance(v, bytes) else str(v),
)
def test_malformed_traffic_gets_a_json_rpc_error_and_the_server_keeps_serving(server, line, code, request_id):
    server.send(line)
    answer = server.receive()
    assert answer["jsonrpc"] == "2.0" and answer["id"] == request_id
    assert answer["error"]["code"] == code and answer["error"]["message"]
    server.good_call_works()


def test_a_20_mb_request_is_answered_and_memory_is_handed_back(server):
    server.send(json.loads(CALL.replace("ID", "20").replace("ARGS", '{"pattern":"x"}')) | {
        "params": {"name": "regex_search", "arguments": {"pattern": "x" * (20 * 1024 * 1024)}}})  # fmt: skip
    answer = server.receive(timeout=60)
    assert answer["id"] == 20 and answer["result"]["isError"] is True
    assert answer["result"]["structuredContent"]["error"]["code"] == "invalid_query"
    assert len(json.dumps(answer)) < 5_000  # the 20 MB pattern is not echoed back
    server.good_call_works()


def test_a_notification_that_is_not_valid_is_answered_with_a_null_id(server):
    server.send(b'{"jsonrpc":"2.0","method":5}')
    answer = server.receive()
    assert answer["id"] is None and answer["error"]["code"] == -32600
    server.good_call_works()
