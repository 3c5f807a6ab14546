"""Shared by the tests/test_hostile_*.py files: a synchronous handle on an in-memory fastmcp
Client (so hypothesis, which drives plain functions, can fuzz the real MCP path), and the
assertion that a call was refused as JSON-RPC -32602."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from fastmcp import Client, FastMCP
from mcp import MCPError

T = TypeVar("T")
INVALID_PARAMS = -32602


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
        self._client: Client | None = None
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
        """Assert the call is refused with -32602; return the message."""
        try:
            self.call(tool, args)
        except MCPError as exc:
            assert exc.error.code == INVALID_PARAMS, (exc.error.code, exc.error.message)
            return exc.error.message
        raise AssertionError(f"{tool}({args!r:.200}) was not refused")

    def close(self) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._session.result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
