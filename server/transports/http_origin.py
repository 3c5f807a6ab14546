"""Host and Origin validation on the HTTP transport: the guard against DNS rebinding.

A server on 127.0.0.1 without a token trusts whoever can reach it, and a web page can reach it
through the user's browser: the attacker's name (`attacker.example`) is made to resolve to
127.0.0.1, and the page's requests arrive with `Host: attacker.example:PORT` and
`Origin: http://attacker.example:PORT`. So before anything else reads a request (the MCP
transport spec asks servers to validate Origin), this ASGI middleware answers 403 unless

- the Host names localhost, a loopback address, the configured bind address, or an entry of
  `server.allowed_hosts` (any port: a reverse proxy may change it); and
- the Origin, when there is one, is a page on localhost, a loopback address or the bind address,
  or an entry of `server.allowed_origins` (scheme, host and port must match).

A request without Origin is not from a browser page (or is a same-origin navigation), and is
fine when its Host is. `"*"` in either list turns that check off. fastmcp's own guard
(`host_origin_protection`) is not used: it answers in plain text (421/403) a JSON-RPC client
cannot show, and its "auto" mode decides from the socket address when to check.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import NamedTuple
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from server.transports.http_errors import refuse

ANY = "*"
DEFAULT_PORTS = {"http": 80, "https": 443}


class HostPort(NamedTuple):
    name: str  # lower-case; an IPv6 address without brackets, in its compressed form
    port: int | None


class Origin(NamedTuple):
    scheme: str
    host: str
    port: int

    def key(self) -> str:
        """The canonical `scheme://host:port` (port always written) two origins compare by."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def split_host(value: str) -> HostPort | None:
    """A Host header (or an allow-list entry) as name and port; None when malformed."""
    value = value.strip().lower()
    try:
        return HostPort(str(ipaddress.ip_address(value)), None)  # a bare address, IPv6 included
    except ValueError:
        pass
    if value.startswith("["):  # [IPv6]:port
        name, bracket, port = value[1:].partition("]")
        try:
            name = str(ipaddress.IPv6Address(name)) if bracket else ""
        except ValueError:
            return None
    else:
        name, colon, digits = value.partition(":")
        port = colon + digits
    if not name or (port and not (port.startswith(":") and port[1:].isdigit())):
        return None
    return HostPort(name, int(port[1:]) if port else None)


def parse_origin(value: str) -> Origin | None:
    """An Origin header (or an allow-list entry) `scheme://host[:port]`; None when it is not one
    (including `null`, which opaque origins such as sandboxed frames send)."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname or parts.username is not None:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return None
    host = split_host(parts.hostname)
    if host is None:
        return None
    return Origin(scheme, host.name, port if port is not None else DEFAULT_PORTS[scheme])


def is_loopback(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _local_names(bind_host: str) -> frozenset[str]:
    """Names a request from this machine may use: localhost, and the bind address unless it is
    a wildcard (0.0.0.0 or ::, which name no host a client could address)."""
    bound = split_host(bind_host)
    if bound is None or bound.name in ("0.0.0.0", "::"):
        return frozenset({"localhost"})
    return frozenset({"localhost", bound.name})


class HostOriginGuard:
    def __init__(
        self, app: ASGIApp, bind_host: str, allowed_hosts: Sequence[str], allowed_origins: Sequence[str]
    ) -> None:
        self.app = app
        self.local = _local_names(bind_host)
        self.any_host = ANY in allowed_hosts
        self.hosts = self.local | {h.name for h in map(split_host, allowed_hosts) if h is not None and h.name != ANY}
        self.any_origin = ANY in allowed_origins
        self.origins = frozenset(o.key() for o in map(parse_origin, allowed_origins) if o is not None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host_header = headers.get("host", "")
        host = split_host(host_header)
        if not self.any_host and (host is None or not (host.name in self.hosts or is_loopback(host.name))):
            await refuse(send, 403, self._host_text(host_header, host))
            return
        origin_header = headers.get("origin")
        if origin_header is not None and not self.any_origin and not self._origin_allowed(parse_origin(origin_header)):
            await refuse(send, 403, self._origin_text(origin_header))
            return
        await self.app(scope, receive, send)

    def _origin_allowed(self, origin: Origin | None) -> bool:
        if origin is None:
            return False
        return origin.host in self.local or is_loopback(origin.host) or origin.key() in self.origins

    def _host_text(self, header: str, host: HostPort | None) -> str:
        name = host.name if host is not None else "<name>"
        return (
            f"Forbidden: this server does not answer requests addressed to Host {_shown(header)}. It answers only "
            f"loopback addresses and {_listed(self.hosts)} (localhost, its bind address and server.allowed_hosts), "
            "so that web pages cannot reach it through a browser (DNS rebinding). If clients reach this server "
            "under that name (e.g. through a reverse proxy), add it to the server's settings: TOML "
            f'`[server] allowed_hosts = ["{name}"]`, or CODEPAGER_SERVER__ALLOWED_HOSTS=\'["{name}"]\'.'
        )

    def _origin_text(self, header: str) -> str:
        origin = parse_origin(header)
        shown = origin.key() if origin is not None else "https://<host>:<port>"
        return (
            f"Forbidden: requests from web pages at Origin {_shown(header)} are refused, so that other sites "
            "cannot use this server through a browser. Pages on localhost, loopback addresses and the bind address "
            f"are allowed, and the origins in server.allowed_origins (now: {_listed(self.origins)}). To trust "
            f'this web client, add it to the server\'s settings: TOML `[server] allowed_origins = ["{shown}"]`, '
            f"or CODEPAGER_SERVER__ALLOWED_ORIGINS='[\"{shown}\"]'. Clients that are not browsers send no Origin."
        )


def _shown(value: str) -> str:
    """A header value quoted for a message, cut short: it comes from the client."""
    return repr(value[:100] + ("..." if len(value) > 100 else ""))


def _listed(names: frozenset[str]) -> str:
    return ", ".join(sorted(names)) if names else "none"
