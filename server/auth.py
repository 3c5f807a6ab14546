"""Bearer-token auth for the HTTP transport, through fastmcp's own auth machinery.

`--auth-token` (or `CODEPAGER_SERVER__AUTH_TOKEN`) is one shared secret, not an OAuth setup, so
the verifier is a `TokenVerifier` that compares against it. fastmcp then installs its
RequireAuthMiddleware on the MCP route: a request without `Authorization: Bearer <token>` (or with
a wrong one) gets 401 before it reaches the server. stdio needs none of this: whoever can write
to the process's stdin already runs as the user.

Why not fastmcp's StaticTokenVerifier: it looks the token up in a dict, which is fine for its
stated purpose (tests), but a secret should be compared in constant time.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging

from fastmcp.server.auth import AccessToken, TokenVerifier

from server.settings import ServerSettings

MIN_TOKEN_LENGTH = 16
CLIENT_ID = "codepager-bearer"

log = logging.getLogger(__name__)


class BearerTokenVerifier(TokenVerifier):
    """Accepts exactly one token, compared in constant time."""

    def __init__(self, token: str) -> None:
        if not token or not token.strip():
            raise ValueError("server.auth_token is empty; set it to a long random string or unset it")
        super().__init__()
        self._token = token.encode()

    async def verify_token(self, token: str) -> AccessToken | None:
        if not hmac.compare_digest(token.encode(), self._token):
            return None
        return AccessToken(token=token, client_id=CLIENT_ID, scopes=[])


def http_auth(settings: ServerSettings) -> BearerTokenVerifier | None:
    """The auth provider for the configured transport, with warnings for risky set-ups."""
    if settings.transport != "http":
        if settings.auth_token:
            log.warning("server.auth_token only applies to --transport http; it is ignored on %s", settings.transport)
        return None
    if settings.auth_token is None:
        if not _is_loopback(settings.host):
            log.warning(
                "serving HTTP on %s without --auth-token: anyone who can reach this address can search "
                "your code. Set --auth-token (or CODEPAGER_SERVER__AUTH_TOKEN), or bind 127.0.0.1.",
                settings.host,
            )
        return None
    if len(settings.auth_token) < MIN_TOKEN_LENGTH:
        log.warning(
            "server.auth_token is only %d characters; use e.g. `python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))'`",
            len(settings.auth_token),
        )
    return BearerTokenVerifier(settings.auth_token)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
