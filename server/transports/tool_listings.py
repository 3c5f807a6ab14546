"""A proxied server's tool list, checked tool by tool, whatever transport reaches it.

The SDK validates a `tools/list` result whole, so one tool whose definition is malformed (an
input schema whose `required` is not a list, or none at all) hid every other tool of that
server, with a warning only in the proxy's log. `ToolListings` drops just the tools that no
protocol version accepts, naming each in the log with what is wrong; a tool some version
accepts is kept, so a listing is never cut for a version this connection may not speak.

It sits between a transport's streams and the client session, where every backend's messages
pass whatever carries them (stdio, streamable HTTP, SSE): `checked_session_class` is a session
class over streams that show each request and reply to a `ToolListings` on their way, which
`server.transports.backend.BackendTransport` hands fastmcp through the public
`TransportOptions.session_class`.
"""

from __future__ import annotations

import logging
from types import TracebackType
from typing import Any

import mcp_types as types
from mcp import ClientSession
from mcp.shared.message import SessionMessage
from mcp_types.methods import SERVER_RESULTS, validate_server_result
from pydantic import ValidationError
from typing_extensions import Self

logger = logging.getLogger(__name__)

_Received = SessionMessage | Exception


class ToolListings:
    """Follows one connection's `tools/list` requests and filters their replies in place."""

    #: Listings awaited at once; beyond it the oldest (a request that timed out) is forgotten.
    MAX_PENDING = 64
    VERSIONS = tuple(sorted({version for method, version in SERVER_RESULTS if method == "tools/list"}))

    def __init__(self) -> None:
        # Ids as text: the SDK matches a reply id "7" to request 7.
        self._pending: dict[str, None] = {}

    def sent(self, message: SessionMessage) -> None:
        request = message.message
        if isinstance(request, types.JSONRPCRequest) and request.method == "tools/list":
            self._pending[str(request.id)] = None
            if len(self._pending) > self.MAX_PENDING:
                del self._pending[next(iter(self._pending))]

    def received(self, message: _Received) -> None:
        reply = message.message if isinstance(message, SessionMessage) else None
        if not isinstance(reply, (types.JSONRPCResponse, types.JSONRPCError)) or str(reply.id) not in self._pending:
            return
        del self._pending[str(reply.id)]
        if not isinstance(reply, types.JSONRPCResponse):
            return
        result = reply.result
        tools = result.get("tools")
        if not isinstance(tools, list) or self._problem(result) is None:
            return
        if self._problem({**result, "tools": []}) is not None:
            return  # wrong outside its tools (a cursor that is not text): no tool is to blame
        result["tools"] = [tool for tool in tools if self._kept(result, tool)]

    def _kept(self, result: dict[str, Any], tool: Any) -> bool:
        problem = self._problem({**result, "tools": [tool]})
        if problem is not None:
            name = tool.get("name") if isinstance(tool, dict) else None
            shown = repr(name)[:100] if isinstance(name, str) else "without a name"
            where = ".".join(map(str, problem["loc"][2:])) or "the tool"  # past "tools", 0
            logger.warning("dropped the server's tool %s from its tool list: %s: %s", shown, where, problem["msg"])
        return problem is None

    @classmethod
    def _problem(cls, result: dict[str, Any]) -> Any:
        """The first error of `result` as a tools/list result, when no version accepts it."""
        problem = None
        for version in cls.VERSIONS:
            try:
                validate_server_result("tools/list", version, result)
            except ValidationError as exc:
                problem = problem or exc.errors()[0]
            else:
                return None
        return problem


class _Watched:
    """A stream the session reads or writes, passing each message by `listings` on its way."""

    def __init__(self, inner: Any, listings: ToolListings) -> None:
        self._inner, self._listings = inner, listings

    @property
    def last_context(self) -> Any:
        """The context the SDK reads off its read stream after each message."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> _Received:
        message: _Received = await self._inner.receive()
        self._listings.received(message)
        return message

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> _Received:
        message: _Received = await self._inner.__anext__()
        self._listings.received(message)
        return message

    async def send(self, message: SessionMessage, /) -> None:
        self._listings.sent(message)
        await self._inner.send(message)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        result: bool | None = await self._inner.__aexit__(exc_type, exc, tb)
        return result


_CHECKED: dict[type[ClientSession], type[ClientSession]] = {}


def checked_session_class(session_class: type[ClientSession]) -> type[ClientSession]:
    """`session_class` over watched streams. One class per base, so that the options a kept-alive
    stdio transport compares between clients stay equal."""
    if session_class in _CHECKED:
        return _CHECKED[session_class]

    class Checked(session_class):  # type: ignore[misc,valid-type]
        def __init__(self, read_stream: Any = None, write_stream: Any = None, *args: Any, **kwargs: Any) -> None:
            if read_stream is not None and write_stream is not None:
                listings = ToolListings()
                read_stream, write_stream = _Watched(read_stream, listings), _Watched(write_stream, listings)
            super().__init__(read_stream, write_stream, *args, **kwargs)

    Checked.__name__ = Checked.__qualname__ = f"ToolListingsChecked{session_class.__name__}"
    _CHECKED[session_class] = Checked
    return Checked
