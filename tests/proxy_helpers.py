"""What the proxy tests share: proxy settings on a tmp directory, and a tool result as it is on
the wire (to compare a proxied result with the backend's own)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastmcp.client.transports import StdioTransport

from server.proxy import Backend
from server.settings import Settings, load_settings
from tests.server_helpers import SECRET

#: The proxy threshold of the proxy tests: results above it (in estimated tokens) are saved.
THRESHOLD = 4000
#: Connection-level result metadata that every server stamps itself; not part of a result.
CONNECTION_META = ("io.modelcontextprotocol/serverInfo",)


def proxy_settings(tmp: Path, **proxy: Any) -> Settings:
    return load_settings(
        None,
        {
            "proxy": {"data_dir": tmp / "data", "threshold_tokens": THRESHOLD, **proxy},
            "offload": {"output_dir": tmp / "offload"},
            "index": {"cache_dir": tmp / "cache"},
            "sessions": {"secret_key": SECRET},
        },
    )


def wire(result: Any) -> dict[str, Any]:
    """What a tool result is on the wire, minus the connection-level metadata."""
    body = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    meta = {k: v for k, v in (body.pop("_meta", None) or {}).items() if k not in CONNECTION_META}
    return {**body, "_meta": meta}


def stdio_transport(backend: Backend) -> StdioTransport:
    """A command backend's transport (a stdio subprocess), whose command and env a test reads or sets."""
    assert isinstance(backend.transport, StdioTransport), backend.transport
    return backend.transport
