"""The servers behind the proxy: from a command line or a standard `mcpServers` config, to the
fastmcp clients that reach them.

Two choices differ from fastmcp's `create_proxy` defaults, on purpose:
- `create_proxy` makes the backend mirror the front connection's protocol era, pinning a
  modern front's exact version without asking the backend; a handshake-only server (the npm
  reference servers, most servers in the wild) then fails every call. Our clients negotiate
  (`mode="auto"`: probe, fall back to the initialize handshake) once per backend session.
- A stdio backend inherits the proxy's whole environment (plus the config's `env`): the proxy
  stands in for the client that would have launched the server, and that client's
  environment (API keys, PATH) is what the server expects.
A stdio backend runs as one long-lived subprocess shared by all calls (fastmcp's keep-alive
transport); when it dies, calls in flight fail and the next call starts a new one. Its output
is read by codepager's own linear, bounded line reader (`KeptStdioTransport`), not the SDK's,
which takes minutes over one 50 MB reply line while the backend's channel stays busy; a reply
over `max_message_bytes` (`MAX_BACKEND_REPLY_BYTES`) fails its call with an error saying so
and is never held whole.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePath

from fastmcp import Client
from fastmcp.client.transports import ClientTransport, StreamableHttpTransport
from fastmcp.mcp_config import MCPConfig, RemoteMCPServer, StdioMCPServer
from fastmcp.server.providers.proxy import ProxyClient
from pydantic import ValidationError

from server.sdk_shim import LargeReplyHttpTransport
from server.transports.backend import BackendTransport
from server.transports.chunked_client import PLAIN_STDIO, KeptStdioTransport
from server.validation_problems import validation_problems

#: The largest reply read from a stdio or streamable-HTTP backend (as JSON or as one server-sent
#: event); a larger one fails its call. Not a setting (it was `proxy.max_backend_message_bytes`):
#: 64 MiB is far over what an agent reads of one tool result (the proxy saves it as a dataset),
#: and it bounds what one reply costs the proxy. Read when a backend is made (a test patches it).
MAX_BACKEND_REPLY_BYTES = 64 << 20
#: How a refused reply's error names this limit.
REPLY_LIMIT = "the most codepager proxy reads of one backend reply"

#: Launchers whose first plain argument, not themselves, names the server.
_LAUNCHERS = frozenset(
    {"npx", "bunx", "pnpx", "uvx", "pipx", "node", "deno", "bun", "python", "python3", "uv", "docker"}
)
_LAUNCHER_WORDS = frozenset({"run", "exec", "x", "dlx", "-m"})


@dataclass(frozen=True)
class Backend:
    """One proxied server: its name (the tool namespace when there are several) and transport.
    `timeout_s` bounds each call to it (None: wait as long as it takes)."""

    name: str
    transport: ClientTransport
    timeout_s: float | None

    def client_factory(self) -> Callable[[], Client[ClientTransport]]:
        """A fresh client per call over the one shared transport (fastmcp's proxy pattern: no
        request context leaks between concurrent calls, the subprocess is shared), connected
        as `BackendTransport` says: tool lists checked tool by tool, no front header forwarded."""
        transport: ClientTransport = BackendTransport(self.transport)
        base = ProxyClient(transport, mode="auto", timeout=self.timeout_s)
        return base.new


def server_name(command: str, args: Sequence[str]) -> str:
    """A readable name for a command: `npx -y @scope/server-x@1 DIR` -> `server-x`."""
    words = [command, *args]
    name = PurePath(command).name
    if name in _LAUNCHERS:
        name = next((w for w in words[1:] if not w.startswith("-") and w not in _LAUNCHER_WORDS), name)
    name = name.rsplit("/", 1)[-1]
    if "@" in name[1:]:
        name = name[: name.index("@", 1)]
    name = PurePath(name.lstrip("@")).stem if name.endswith((".py", ".js", ".mjs", ".ts")) else name.lstrip("@")
    return name or "backend"


def _stdio(
    command: str, args: Sequence[str], env: dict[str, str], max_message_bytes: int, cwd: str | None = None
) -> KeptStdioTransport:
    """A stdio transport, after checking the command exists: a typo should stop the proxy at
    start with its name, not surface later as a backend with no tools."""
    program = os.path.join(cwd, command) if cwd and os.sep in command else command
    if shutil.which(program, path=env.get("PATH")) is None:
        raise ValueError(f"backend command not found or not executable: {command!r}")
    framing = replace(PLAIN_STDIO, max_message_bytes=max_message_bytes, limit_setting=REPLY_LIMIT)
    return KeptStdioTransport(command, list(args), env=env, cwd=cwd, framing=framing)


def command_backend(
    command: Sequence[str],
    *,
    name: str | None = None,
    timeout_s: float | None = None,
    max_message_bytes: int | None = None,
) -> Backend:
    """The backend `codepager proxy -- COMMAND ARGS...` runs; `max_message_bytes` bounds its
    replies (`MAX_BACKEND_REPLY_BYTES` when not given, read now)."""
    if not command:
        raise ValueError("no backend command: use `codepager proxy -- COMMAND [ARGS...]` or --servers mcp.json")
    program, *args = command
    largest = MAX_BACKEND_REPLY_BYTES if max_message_bytes is None else max_message_bytes
    return Backend(name or server_name(program, args), _stdio(program, args, dict(os.environ), largest), timeout_s)


def config_backends(
    path: Path, *, timeout_s: float | None = None, max_message_bytes: int | None = None
) -> list[Backend]:
    """Every server in a standard `{"mcpServers": {...}}` file. A server's own `timeout`
    (milliseconds, as in the format) wins over `timeout_s`; `max_message_bytes` bounds a stdio
    or streamable-HTTP server's replies (`MAX_BACKEND_REPLY_BYTES` when not given, read now)."""
    largest = MAX_BACKEND_REPLY_BYTES if max_message_bytes is None else max_message_bytes
    if not path.is_file():
        raise FileNotFoundError(f"MCP config not found: {path}")
    try:
        config = MCPConfig.from_file(path)
    except ValidationError as exc:  # values unshown: a server's env and headers hold tokens
        problems = validation_problems(exc, shown=lambda _: False)
        raise ValueError(f"{path} is not a valid mcpServers config: {'; '.join(problems)}") from None
    except ValueError as exc:
        raise ValueError(f"{path} is not a valid mcpServers config: {exc}") from None
    if not config.mcpServers:
        raise ValueError(f"{path} defines no servers under mcpServers")
    backends = []
    for name, server in config.mcpServers.items():
        if type(server) not in (StdioMCPServer, RemoteMCPServer):
            # fastmcp's tool transforms run the server behind an inner proxy of fastmcp's own,
            # which reads stdio unbounded, forwards the caller's headers and lists tools unchecked
            raise ValueError(
                f"{path}: server {name!r} uses fastmcp's tool transforms (tools, include_tags, exclude_tags), "
                "which codepager proxy does not support; remove them from its entry"
            )
        timeout = server.timeout / 1000 if server.timeout else timeout_s
        if type(server) is StdioMCPServer:
            env = {**os.environ, **{k: str(v) for k, v in server.env.items()}}
            transport: ClientTransport = _stdio(server.command, server.args, env, largest, server.cwd)
        else:
            assert isinstance(server, RemoteMCPServer), "the only other type left"
            transport = server.to_transport()
            if type(transport) is StreamableHttpTransport:  # replies as large as a stdio backend's
                transport = LargeReplyHttpTransport(
                    transport.url, headers=transport.headers, auth=server.auth, max_message_bytes=largest
                )
        backends.append(Backend(name, transport, timeout))
    return backends


class ToolOwners:
    """Which backend a front-facing tool name belongs to, and its name there.

    One backend: tools keep their names. Several: fastmcp prefixes each with its server's name
    (`github_search`), so the longest matching `<server>_` prefix owns the tool."""

    def __init__(self, backends: Sequence[Backend]) -> None:
        self.names = [b.name for b in backends]
        self.namespaced = len(backends) > 1

    def owner(self, tool: str) -> tuple[str, str] | None:
        """(server, backend tool name), or None for a name no backend can have."""
        if not self.namespaced:
            return (self.names[0], tool) if self.names else None
        for server in sorted(self.names, key=len, reverse=True):
            if tool.startswith(f"{server}_"):
                return server, tool[len(server) + 1 :]
        return None
