"""Broken MCP traffic against a real `codepager serve` process, on plain stdio and on
chunked-stdio, driven with raw JSON lines (a client library would refuse to send most of these):
not JSON, not JSON-RPC, batches, invalid UTF-8, lone surrogates, unknown methods and tools, wrong
argument types, requests over the size limit, and on chunked-stdio the same arriving as frames,
and floods of framed messages that never complete.
Each gets a proper JSON-RPC error (with the request's id when it has a readable one, so no client
waits forever), and the same process answers a good call after every one of them. An oversized
line is discarded as it streams: the server's peak RSS does not grow by its size."""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.commands import codepager_cmd
from harness.patched import patched_codepager_cmd
from server.transports.framing import encode_message
from tests.server_helpers import serve_env

GOOD_CALL = {
    "jsonrpc": "2.0",
    "method": "tools/call",
    "params": {"name": "regex_search", "arguments": {"pattern": "needle"}},
}


MB = 1024 * 1024
LIMIT = 4 * MB  # the default server.max_request_bytes


class RawStdio:
    def __init__(
        self, root: Path, tmp: Path, transport: str, constants: dict[str, Any] | None = None, **settings: str
    ) -> None:
        """`settings` as `serve_env` takes them; the module `constants` set (`harness.patched`)."""
        cmd, args = patched_codepager_cmd(constants) if constants else codepager_cmd()
        self.transport = transport
        self.proc = subprocess.Popen(
            [cmd, *args, "serve", "--root", str(root), "--transport", transport],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=serve_env(tmp, **settings),
        )
        self.next_id = 1000
        # Answers are read as they come, so a flood of them never fills the pipe and stalls the server.
        self._answers: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read_answers, name="raw-stdio-reader", daemon=True).start()

    def _read_answers(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._answers.put(line)

    def send(self, line: bytes | dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        data = line if isinstance(line, bytes) else json.dumps(line).encode()
        self.proc.stdin.write(data if data.endswith(b"\n") else data + b"\n")
        self.proc.stdin.flush()

    def answers_and_peak_rss_growth(self, line: bytes) -> tuple[list[dict[str, Any]], int]:
        """Send `line` and then a good call; return the answers that came before the good
        call's, and how far the server's peak RSS rose above its RSS at the start meanwhile."""
        status = Path(f"/proc/{self.proc.pid}/status")
        Path(f"/proc/{self.proc.pid}/clear_refs").write_text("5")  # reset the peak (VmHWM) to now
        before = _kib(status, "VmRSS")
        self.send(line)
        self.next_id += 1
        self.send({**GOOD_CALL, "id": self.next_id})
        answers = []
        while (answer := self.receive(timeout=120))["id"] != self.next_id:
            answers.append(answer)
        assert answer["result"]["structuredContent"]["results"]["count"] == 1
        return answers, (_kib(status, "VmHWM") - before) * 1024

    def receive(self, timeout: float = 30) -> dict[str, Any]:
        try:
            answer: dict[str, Any] = json.loads(self._answers.get(timeout=timeout))
            return answer
        except queue.Empty:
            raise AssertionError("no answer: the server dropped the message") from None

    def good_call_works(self) -> None:
        self.next_id += 1
        self.send({**GOOD_CALL, "id": self.next_id})
        answer = self.receive()
        assert answer["id"] == self.next_id and answer["result"]["structuredContent"]["results"]["count"] == 1

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _kib(status: Path, field: str) -> int:
    line = next(line for line in status.read_text().splitlines() if line.startswith(field + ":"))
    return int(line.split()[1])


@contextlib.contextmanager
def raw_server(
    transport: str, tmp_path_factory, constants: dict[str, Any] | None = None, **settings: str
) -> Iterator[RawStdio]:
    """A real `codepager serve` over `transport` (with `settings` as in `serve_env`, and the
    module `constants` set), initialized, checked to exit cleanly."""
    tmp = tmp_path_factory.mktemp("raw-mcp")
    root = tmp / "repo"
    root.mkdir()
    (root / "a.txt").write_text("needle\n")
    raw = RawStdio(root, tmp, transport, constants, **settings)
    raw.send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        }
    )
    assert raw.receive(timeout=90)["id"] == 1
    raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    yield raw
    raw.close()
    assert raw.proc.returncode == 0


@pytest.fixture(scope="module", params=["stdio", "chunked-stdio"])
def server(request, tmp_path_factory):
    with raw_server(request.param, tmp_path_factory) as raw:
        yield raw


@pytest.fixture(scope="module")
def chunked_server(tmp_path_factory):
    """For what only the chunked framing can carry (frames)."""
    with raw_server("chunked-stdio", tmp_path_factory) as raw:
        yield raw


CALL = '{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"regex_search","arguments":ARGS}}'
HYBRID = CALL.replace("regex_search", "hybrid_search")


@pytest.mark.slow
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
        # An argument the tool does not declare is refused, whatever its shape, never handed on.
        (CALL.replace("ID", "16").replace("ARGS", '{"pattern":"x","page_args":{"cursor":"c"}}').encode(), -32602, 16),
        # The JSON parser reads NaN and 1e999 (infinity) as floats: as a threshold, the search
        # answered `"threshold": null` and kept nothing (NaN, 1e999) or everything (-1e999),
        # instead of refusing a bound that is no number.
        (
            HYBRID.replace("ID", "17").replace("ARGS", '{"query":"needle","mode":"semantic","threshold":NaN}').encode(),
            -32602,
            17,
        ),
        (HYBRID.replace("ID", "18").replace("ARGS", '{"query":"needle","threshold":-1e999}').encode(), -32602, 18),
        (HYBRID.replace("ID", "19").replace("ARGS", '{"query":"needle","threshold":1e999}').encode(), -32602, 19),
    ],
    ids=lambda v: None if isinstance(v, bytes) else str(v),
)
def test_malformed_traffic_gets_a_json_rpc_error_and_the_server_keeps_serving(server, line, code, request_id):
    server.send(line)
    answer = server.receive()
    assert answer["jsonrpc"] == "2.0" and answer["id"] == request_id
    assert answer["error"]["code"] == code and answer["error"]["message"]
    server.good_call_works()


def _big_call(request_id: int, size: int) -> bytes:
    pattern = "x" * size
    return CALL.replace("ID", str(request_id)).replace("ARGS", json.dumps({"pattern": pattern})).encode()


def _assert_too_large(answer: dict[str, Any], request_id: int | None) -> None:
    assert answer["id"] == request_id and answer["error"]["code"] == -32600, answer
    message = answer["error"]["message"]
    assert f"limit of {LIMIT} bytes" in message and "server.max_request_bytes" in message
    assert len(json.dumps(answer)) < 5_000  # the request is not echoed back


@pytest.mark.slow
def test_a_20_mb_request_is_refused_with_its_id_without_being_held(server):
    answers, growth = server.answers_and_peak_rss_growth(_big_call(20, 20 * MB))
    assert len(answers) == 1
    _assert_too_large(answers[0], 20)
    assert growth < 10 * MB, f"peak RSS rose {growth / MB:.0f} MB for a 20 MB line"


@pytest.mark.slow
def test_a_100_mb_line_of_garbage_costs_no_memory(server):
    answers, growth = server.answers_and_peak_rss_growth(b"x" * (100 * MB))
    assert growth < 10 * MB, f"peak RSS rose {growth / MB:.0f} MB for a 100 MB line"
    assert len(answers) == 1
    _assert_too_large(answers[0], None)


@pytest.mark.slow
def test_a_request_just_under_the_limit_is_served(server):
    """A pattern of 4 MiB minus the envelope passes the transport's message limit and reaches
    the tool, whose own bound on a pattern (256 KiB) answers it: the argument's error, as an
    error or an isError result depending on the protocol version, never the transport's."""
    line = _big_call(21, LIMIT - 200)
    assert len(line) <= LIMIT
    server.send(line)
    answer = server.receive(timeout=60)
    assert answer["id"] == 21 and "at most 262,144 are taken" in json.dumps(answer), answer
    server.good_call_works()


@pytest.mark.slow
def test_a_notification_that_is_not_valid_is_answered_with_a_null_id(server):
    server.send(b'{"jsonrpc":"2.0","method":5}')
    answer = server.receive()
    assert answer["id"] is None and answer["error"]["code"] == -32600
    server.good_call_works()


FRAMED = [
    (b'{"jsonrpc":"2.0","id":2,' + b'"p":"' + b"y" * 10_000, -32700, None),
    (b'{"jsonrpc":"2.0","id":4,"p":"' + b"y" * 10_000 + b'"}', -32600, 4),
    (b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":"' + b"y" * 10_000 + b'"}', -32600, 5),
]


@pytest.mark.slow
@pytest.mark.parametrize(("message", "code", "request_id"), FRAMED, ids=["parse", "no-method", "bad-params"])
def test_malformed_messages_arriving_as_frames_are_answered_too(chunked_server, message, code, request_id):
    chunked_server.send(b"".join(encode_message(message.decode(), 4096)))
    answer = chunked_server.receive()
    assert answer["id"] == request_id and answer["error"]["code"] == code
    chunked_server.good_call_works()


@pytest.mark.slow
def test_a_framed_request_over_the_limit_is_refused_as_its_frames_pass_it(chunked_server):
    frames = encode_message(_big_call(22, 20 * MB).decode(), 60 * 1024)
    chunked_server.send(b"".join(frames))
    _assert_too_large(chunked_server.receive(timeout=60), 22)  # the id is read from the first frame
    chunked_server.good_call_works()


@pytest.mark.slow
def test_one_over_long_frame_costs_no_memory_and_is_refused_with_its_id(chunked_server):
    frame = b"0b6f0f4e-4a47-4d55-9b3f-2c9b4d3f6a10:0:1:" + _big_call(23, 100 * MB)
    answers, growth = chunked_server.answers_and_peak_rss_growth(frame)
    assert len(answers) == 1
    _assert_too_large(answers[0], 23)
    assert growth < 10 * MB, f"peak RSS rose {growth / MB:.0f} MB for a 100 MB frame"


MAX_PARTIAL = 64  # framing's DEFAULT_MAX_PARTIAL_MESSAGES


def _frame(message_id: str, index: int, total: int, data: bytes = b"") -> bytes:
    return f"{message_id}:{index}:{total}:".encode() + data + b"\n"


def _assert_dropped(answer: dict[str, Any], request_id: int | None, reason: str) -> None:
    assert answer["id"] == request_id and answer["error"]["code"] == -32600, answer
    assert reason in answer["error"]["message"], answer


@pytest.mark.slow
def test_ten_thousand_incomplete_messages_neither_stall_the_server_nor_pile_up(chunked_server):
    """10,000 first frames that never get their second: the server holds 64 of them and refuses
    the rest at once (each answered -32600), and a ping sent behind them answers fast. Before,
    every line scanned every incomplete message (a 32 s stall, then a 16 s ping) and all were held.
    The bound is 5 s, not less: the ping queues behind the answers to the ~2,500 frames still in
    the pipe when the flood's write returns, a thread hop each (0.4-1.9 s with 8 agents on 2 cores)."""
    ids = [str(uuid.uuid4()) for _ in range(10_000)]
    chunked_server.send(b"".join(_frame(message_id, 0, 2) for message_id in ids))
    sent = time.monotonic()
    chunked_server.send({"jsonrpc": "2.0", "id": 30, "method": "ping"})
    refusals = []
    while (answer := chunked_server.receive())["id"] != 30:
        refusals.append(answer)
    elapsed = time.monotonic() - sent
    assert answer["result"] == {} and elapsed < 5, f"the ping took {elapsed:.1f} s"
    assert len(refusals) == len(ids) - MAX_PARTIAL  # so at most 64 were ever held
    for refusal in refusals:
        _assert_dropped(refusal, None, f"{MAX_PARTIAL} framed messages are already incomplete")
    # The 64 held are the first 64 and still complete; a refused one's late frame is ignored.
    ping = '{"jsonrpc":"2.0","id":%d,"method":"ping"}'
    chunked_server.send(
        b"".join(_frame(mid, 1, 2, (ping % (100 + i)).encode()) for i, mid in enumerate(ids[: MAX_PARTIAL + 1]))
    )
    answers = [chunked_server.receive() for _ in range(MAX_PARTIAL)]
    assert sorted(answer["id"] for answer in answers) == list(range(100, 100 + MAX_PARTIAL))
    chunked_server.good_call_works()  # and nothing was answered for the refused message's frame


@pytest.mark.slow
def test_a_message_claiming_a_billion_frames_is_refused_at_once_and_costs_no_memory(chunked_server):
    """A header's totalChunks is a claim, never a size to allocate or wait for: over the frame
    cap, the first frame drops the message (-32600 with the id its data shows) and the 300,000
    empty frames after it are discarded. Before, they were all held (RSS grew by tens of MB)."""
    message_id = str(uuid.uuid4())
    head = b'{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"regex_search","arguments":'
    flood = _frame(message_id, 0, 999_999_999, head) + b"".join(
        _frame(message_id, i, 999_999_999) for i in range(1, 300_000)
    )
    answers, growth = chunked_server.answers_and_peak_rss_growth(flood)
    assert len(answers) == 1, answers
    _assert_dropped(answers[0], 31, "claims 999999999 frames")
    assert growth < 10 * MB, f"peak RSS rose {growth / MB:.0f} MB for 300,000 empty frames"


@pytest.mark.slow
def test_empty_frames_are_paid_for_against_the_reassembly_buffer(tmp_path_factory):
    """Each held frame counts its data plus a fixed overhead, so empty frames are not free: with
    a 1 MiB buffer, a message within the frame cap fed only empty frames is dropped once the
    buffer is spent, answered with its id. Before, empty frames counted 0 bytes and never did."""
    budget = {"server.transports.framing.DEFAULT_MAX_BUFFERED_BYTES": MB}
    with raw_server("chunked-stdio", tmp_path_factory, budget, server__max_request_bytes=str(MB)) as raw:
        message_id, total = str(uuid.uuid4()), 32_768
        head = b'{"jsonrpc":"2.0","id":32,"method":"tools/call","params":{"name":"regex_search","arguments":'
        flood = _frame(message_id, 0, total, head) + b"".join(_frame(message_id, i, total) for i in range(1, total - 1))
        answers, growth = raw.answers_and_peak_rss_growth(flood)
        assert len(answers) == 1, answers
        _assert_dropped(answers[0], 32, f"over {MB} bytes")
        assert growth < 10 * MB, f"peak RSS rose {growth / MB:.0f} MB"
