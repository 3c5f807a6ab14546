"""How the proxy connects to each of its backends, whatever the transport: one wrapper around
the backend's own transport that sets the connection options codepager's proxy needs, through
fastmcp's public `TransportOptions`.

- Each tool list is checked tool by tool (`server.transports.tool_listings`), so one malformed
  tool definition hides only that tool.
- No header of the front connection is forwarded. fastmcp's proxy forwards the caller's HTTP
  headers, `Authorization` included, to every HTTP backend by default; behind `codepager proxy
  --transport http --auth-token T`, every remote backend received `Bearer T`, the proxy's own
  token (and a backend configured with a token of its own got both). A backend authenticates
  with what its `mcpServers` entry says (`headers`, `auth`), as when the client reached it
  directly.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace

from fastmcp.client.transports import ClientTransport
from fastmcp.client.transports.base import SessionKwargs, TransportOptions
from mcp import ClientSession
from typing_extensions import Unpack

from server.transports.tool_listings import checked_session_class


class BackendTransport(ClientTransport):
    """`inner`, connected as the proxy connects to a backend (see the module doc)."""

    def __init__(self, inner: ClientTransport) -> None:
        self.inner = inner
        self.legacy_only = inner.legacy_only

    @contextlib.asynccontextmanager
    async def connect_session(
        self, *, transport_options: TransportOptions | None = None, **session_kwargs: Unpack[SessionKwargs]
    ) -> AsyncIterator[ClientSession]:
        options = transport_options or TransportOptions()
        options = replace(
            options, session_class=checked_session_class(options.session_class), forward_incoming_headers=False
        )
        async with self.inner.connect_session(transport_options=options, **session_kwargs) as session:
            yield session

    async def close(self) -> None:
        await self.inner.close()  # type: ignore[no-untyped-call]  # fastmcp leaves it unannotated

    def get_session_id(self) -> str | None:
        return self.inner.get_session_id()

    def __repr__(self) -> str:
        return f"<BackendTransport({self.inner!r})>"
