"""The HTTP transport's two clocks, driven by the test instead of by real time: a request body's
idle timeout (`RequestBodyLimits`, an ASGI middleware) and a request head's deadline
(`HeadDeadlineProtocol`, uvicorn's h11 protocol plus a timer). Each timer is one the test
fires itself, so "idle time, not age" and "a deadline, not an idle timer" are asserted exactly,
however loaded the machine. The real servers' answers to a stalled body and a silent
connection are in tests/test_http_auth.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from starlette.types import Message, Receive, Scope, Send
from uvicorn.config import Config
from uvicorn.server import ServerState

from server.transports.http_head import HeadDeadlineProtocol
from server.transports.http_limit import RequestBodyLimits

TIMEOUT_S = 1.5


class ManualTimers:
    """`idle_timer` for RequestBodyLimits: every scope it hands out expires only when the test
    says so (`expire_all`), whatever the seconds asked for."""

    def __init__(self) -> None:
        self.scopes: list[anyio.CancelScope] = []
        self.asked: list[float] = []

    def __call__(self, seconds: float) -> anyio.CancelScope:
        self.asked.append(seconds)
        self.scopes.append(anyio.CancelScope())
        return self.scopes[-1]

    def expire_all(self) -> None:
        """Time passes beyond the timeout for every wait started so far."""
        for scope in self.scopes:
            scope.cancel()


SCOPE: Scope = {
    "type": "http",
    "method": "POST",
    "path": "/mcp",
    "headers": [(b"content-type", b"application/json")],
}


async def run_limits(
    timers: ManualTimers, pieces: list[bytes], between: Callable[[int], Any]
) -> tuple[list[Message], list[bytes]]:
    """What the middleware sends, and the bodies the app behind it received, for a body that
    arrives as `pieces`; `between(i)` runs before piece i is handed over (it may block)."""
    sent: list[Message] = []
    received: list[bytes] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        received.append(message["body"])

    async def receive() -> Message:
        i = len(handed)
        await between(i)
        handed.append(i)
        return {"type": "http.request", "body": pieces[i], "more_body": i < len(pieces) - 1}

    async def send(message: Message) -> None:
        sent.append(message)

    handed: list[int] = []
    limits = RequestBodyLimits(app, 1 << 20, TIMEOUT_S, 1 << 20, idle_timer=timers)
    await limits(SCOPE, receive, send)
    return sent, received


async def test_a_body_arriving_steadily_is_served_however_long_it_takes_in_all() -> None:
    """Idle time, not age: before each piece, every timeout armed so far runs out (far more
    time than the timeout passes in all), yet each wait armed its own timer, and the body is
    served whole."""
    timers = ManualTimers()
    text = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    pieces = [text[i : i + 8] for i in range(0, len(text), 8)]

    async def later(i: int) -> None:
        if i:
            timers.expire_all()  # the waits that already got their piece: nothing to cut off

    sent, received = await run_limits(timers, pieces, later)
    assert received == [text] and sent == []
    assert timers.asked == [TIMEOUT_S] * len(pieces)  # one idle timer per wait


async def test_a_body_that_stops_arriving_is_answered_408_when_its_timer_runs_out() -> None:
    timers = ManualTimers()
    waiting = anyio.Event()

    async def stall(i: int) -> None:
        if i == 1:
            waiting.set()
            await anyio.sleep_forever()  # the client sends nothing more

    async with anyio.create_task_group() as tg:
        outcome: list[tuple[list[Message], list[bytes]]] = []

        async def run() -> None:
            outcome.append(await run_limits(timers, [b'{"jsonrpc"', b":2}"], stall))

        tg.start_soon(run)
        await waiting.wait()
        assert not outcome  # still waiting: no timer has run out
        timers.expire_all()
    sent, received = outcome[0]
    assert received == []  # the app never saw the request
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 408
    error = json.loads(sent[1]["body"])["error"]
    assert error["code"] == -32600 and "10 bytes received" in error["message"]
    assert "server.request_timeout_s" in error["message"]


class Handle:
    def __init__(self, delay: float, callback: Callable[[], None]) -> None:
        self.delay, self.callback, self.cancelled = delay, callback, False

    def cancel(self) -> None:
        self.cancelled = True


class ManualLoop:
    """The loop HeadDeadlineProtocol arms its deadline on: timers the test fires."""

    def __init__(self) -> None:
        self.handles: list[Handle] = []

    def call_later(self, delay: float, callback: Callable[[], None]) -> Handle:
        self.handles.append(Handle(delay, callback))
        return self.handles[-1]

    def armed(self) -> list[Handle]:
        return [h for h in self.handles if not h.cancelled]


class Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8765)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


@pytest.fixture
def connection() -> tuple[HeadDeadlineProtocol, ManualLoop, Transport]:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:  # never reached: no head completes
        raise AssertionError("a request reached the app")

    loop = ManualLoop()
    protocol = HeadDeadlineProtocol(
        Config(app=app, log_level="critical"),
        ServerState(),
        {},
        loop,
        deadline_s=TIMEOUT_S,
    )
    transport = Transport()
    protocol.connection_made(transport)
    return protocol, loop, transport


def assert_closed_with_408(transport: Transport) -> None:
    head, _, body = transport.written.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ") and transport.closed
    error = json.loads(body)["error"]
    assert error["code"] == -32600 and "headers did not all arrive" in error["message"]


def test_a_connection_that_sends_nothing_is_closed_at_its_deadline(connection) -> None:
    """Before, uvicorn had no timeout for a head: a silent connection held its descriptor as
    long as the client liked."""
    _, loop, transport = connection
    [deadline] = loop.armed()
    assert deadline.delay == TIMEOUT_S and transport.written == b""
    deadline.callback()
    assert_closed_with_408(transport)


def test_a_head_trickling_a_byte_at_a_time_keeps_its_first_deadline(connection) -> None:
    """A deadline, not an idle timer: bytes of an unfinished head never re-arm it, so a client
    sending one now and then is still closed when the first deadline comes."""
    protocol, loop, transport = connection
    protocol.data_received(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    for _ in range(100):
        protocol.data_received(b"X")  # one byte of a header name, never finished
    [deadline] = loop.armed()
    assert len(loop.handles) == 1 and not transport.closed
    deadline.callback()
    assert_closed_with_408(transport)


def test_a_connection_lost_disarms_its_deadline(connection) -> None:
    protocol, loop, _ = connection
    protocol.connection_lost(None)
    assert loop.armed() == []
