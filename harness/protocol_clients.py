"""Real fastmcp Clients (in memory) that negotiate a given MCP protocol version.

fastmcp's Client speaks 2026-07-28 (`mode="auto"` or the version) or the newest handshake version,
2025-11-25 (`mode="legacy"`): the SDK's session always offers that one in `initialize`. For an
older version the session here offers it instead, and the server agrees to any version it
supports, as a client built against an older SDK would see.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

from fastmcp import Client, FastMCP
from fastmcp.client.transports import FastMCPTransport
from fastmcp.client.transports.base import TransportOptions
from mcp.client.session import ClientSession
from mcp_types import (
    ClientCapabilities,
    Implementation,
    InitializedNotification,
    InitializeRequest,
    InitializeRequestParams,
    InitializeResult,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION, MODERN_PROTOCOL_VERSIONS

#: Every protocol version a client can negotiate with this SDK, oldest first.
PROTOCOL_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)


def _offering(version: str) -> type[ClientSession]:
    class OfferingSession(ClientSession):  # the SDK's own: fastmcp < 4.2 (Python 3.10) has no other
        """A session whose `initialize` offers `version` (the SDK's offers the newest)."""

        async def initialize(self) -> InitializeResult:
            params = InitializeRequestParams(
                protocol_version=version,
                capabilities=ClientCapabilities(),
                client_info=Implementation(name="protocol-test-client", version="1.0"),
            )
            result = await self.send_request(InitializeRequest(params=params), InitializeResult)
            self.adopt(result)
            await self.send_notification(InitializedNotification())
            return result

    return OfferingSession


class _OfferingTransport(FastMCPTransport):
    """The in-memory transport, with sessions that offer one protocol version."""

    def __init__(self, app: FastMCP[Any], version: str) -> None:
        super().__init__(app)
        self.session_class = _offering(version)

    @contextlib.asynccontextmanager
    async def connect_session(
        self, *, transport_options: TransportOptions | None = None, **session_kwargs: Any
    ) -> AsyncIterator[ClientSession]:
        options = dataclasses.replace(transport_options or TransportOptions(), session_class=self.session_class)
        async with super().connect_session(transport_options=options, **session_kwargs) as session:
            yield session


def client_at(app: FastMCP[Any], version: str) -> Client[Any]:
    """A fastmcp Client of `app` that negotiates protocol `version`."""
    if version in MODERN_PROTOCOL_VERSIONS:
        return Client(app, mode=version)
    if version == LATEST_HANDSHAKE_VERSION:
        return Client(app, mode="legacy")
    return Client(_OfferingTransport(app, version), mode="legacy")
