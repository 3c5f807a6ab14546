"""Shared by the tests/test_hostile_*.py files: a synchronous handle on an in-memory fastmcp
Client (so hypothesis, which drives plain functions, can fuzz the real MCP path), the
assertion that a call was refused as invalid (sync and async: JSON-RPC -32602, or an isError
result with a refusal code from MCP 2025-11-25), and the peak memory
growth of a server process read from /proc, and the 300 MB SELECT that the server's and the
proxy's analyze-with-duckdb must both stream."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from fastmcp import Client, FastMCP
from mcp import MCPError
from mcp_types.version import is_version_at_least

from server.errors import REFUSALS, REFUSALS_AS_TOOL_ERRORS_SINCE

T = TypeVar("T")
INVALID_PARAMS = -32602
MB = 1024 * 1024
#: The SQL that both the server's and the proxy's analyze-with-duckdb must stream, never hold:
#: 30,000 rows of 10 KB: a 300 MB result (the issue's query had 8,000 rows of 100 KB; narrower
#: rows keep DuckDB's own working set, one 2,048-row vector, small next to what is measured).
WIDE_ROWS, WIDE_CHARS = 30_000, 10_000
HUGE_SELECT = f"SELECT repeat('x', {WIDE_CHARS}) || i AS s FROM range({WIDE_ROWS}) t(i)"


class SyncClient:
    """One connected in-memory Client on a private event loop thread.

    The connection's context lives in one long-running task (anyio requires that it be exited
    by the task that entered it); calls are submitted to the loop from the test thread."""

    def __init__(self, app: FastMCP) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="sync-client", daemon=True)
        self._thread.start()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._client: Client[Any] | None = None
        self._session = asyncio.run_coroutine_threadsafe(self._hold(app), self._loop)
        if not self._ready.wait(60):
            raise RuntimeError("in-memory client did not connect")

    async def _hold(self, app: FastMCP) -> None:
        self._stop = asyncio.Event()
        async with Client(app) as client:
            self._client = client
            self._ready.set()
            await self._stop.wait()

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float = 120) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def call(self, tool: str, args: dict[str, Any], **kw: Any) -> Any:
        assert self._client is not None
        return self._run(self._client.call_tool(tool, args, **kw))

    def refused(self, tool: str, args: dict[str, Any]) -> str:
        """Assert the call is refused (`refused_async`); return the message."""
        assert self._client is not None
        return self._run(refused_async(self._client, tool, args))

    def close(self) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._session.result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


async def refusal(client: Client[Any], tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """Assert the call on a connected (async) Client is refused as invalid, on the channel its
    protocol version gets: JSON-RPC -32602 before MCP 2025-11-25, an isError result from then
    on, with a refusal code either way. Returns `{code, message, hint, ...}` (the error's data
    and message, or the result's `error` object)."""
    as_result = is_version_at_least(client.protocol_version or "", REFUSALS_AS_TOOL_ERRORS_SINCE)
    try:
        result = await client.call_tool(tool, args, raise_on_error=False)
    except MCPError as exc:
        assert not as_result, (client.protocol_version, exc.error.message)
        assert exc.error.code == INVALID_PARAMS, (exc.error.code, exc.error.message)
        assert isinstance(exc.error.data, dict), exc.error.data
        error = {**exc.error.data, "message": exc.error.message}
    else:
        assert as_result and result.is_error, f"{tool}({args!r:.200}) was not refused: {result.structured_content}"
        error = (result.structured_content or {})["error"]
    assert error["code"] in REFUSALS, error
    return error


async def refused_async(client: Client[Any], tool: str, args: dict[str, Any]) -> str:
    """Assert the call is refused (`refusal`); return the message."""
    message: str = (await refusal(client, tool, args))["message"]
    return message


def proc_status_kib(pid: int, field: str) -> int:
    """One `Field:  N kB` line of /proc/PID/status (VmRSS, VmHWM, ...), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


class PeakRssGrowth:
    """How far a process's peak resident memory (VmHWM) rises during a `with` block.

    Entering resets the kernel's peak to the current RSS (5 -> /proc/PID/clear_refs), so a
    peak the process reached earlier (start-up, a model load) cannot hide growth inside the
    block; `before` and `after` are VmHWM at entry and exit, in KiB.

        with PeakRssGrowth(server.proc.pid) as rss:
            ...
        assert rss.growth_bytes < 20 * 2**20
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.before = self.after = 0

    def __enter__(self) -> PeakRssGrowth:
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")
        self.before = proc_status_kib(self.pid, "VmHWM")
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.after = proc_status_kib(self.pid, "VmHWM")

    @property
    def growth_bytes(self) -> int:
        return (self.after - self.before) * 1024
