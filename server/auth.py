"""Bearer-token auth for the HTTP transport: one shared secret, checked on the headers.

The token (configured, or generated and kept: server/auth_token.py says which) is one static
secret, not an OAuth set-up, so it is checked by a small ASGI middleware of ours rather than
fastmcp's auth providers. Two reasons. It runs before anything reads the request body
(server/transports/run.py orders it ahead of the size cap), so a client without the token
cannot make the server buffer anything; fastmcp's check sits on the MCP route, behind every
app-level middleware. And its 401 says what is missing and how to pass it, where fastmcp's
answers with an empty body, or with advice to "re-register" that fits OAuth clients only.

The token is compared in constant time (`hmac.compare_digest`), on the raw header bytes.
"""

from __future__ import annotations

import hmac

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from server.transports.http_errors import refuse

BEARER = b"bearer "


class BearerTokenGuard:
    """Answers 401 to every HTTP request without `Authorization: Bearer <the token>`."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = presented_token(scope)
        if given is not None and hmac.compare_digest(given, self._token):
            await self.app(scope, receive, send)
            return
        if given is None:
            text, challenge = "Unauthorized: this server requires a bearer token.", b"Bearer"
        else:
            text, challenge = "Unauthorized: invalid token.", b'Bearer error="invalid_token"'
        await refuse(send, 401, f"{text} {_how_to_pass_it(scope)}", [(b"www-authenticate", challenge)])


def presented_token(scope: Scope) -> bytes | None:
    """The token of the request's `Authorization: Bearer <token>` header, as raw bytes; None
    when there is no such header, it has another scheme (Basic, ...), or the token is empty."""
    for name, value in scope["headers"]:
        if name == b"authorization":
            token = value[len(BEARER) :].strip() if value[: len(BEARER)].lower() == BEARER else b""
            return token or None
    return None


def _how_to_pass_it(scope: Scope) -> str:
    """The guidance every 401 carries. The URL is the one the client used (its Host was checked
    by the Host/Origin guard before this runs)."""
    url = f"{scope.get('scheme', 'http')}://{Headers(scope=scope).get('host', '<host>')}{scope.get('path', '/mcp')}"
    return (
        "Send the header `Authorization: Bearer <token>` with every request, where <token> is the value "
        "the server was started with (--auth-token or CODEPAGER_SERVER__AUTH_TOKEN) or, without one, the one it "
        "generated: printed on its stderr at start and kept in http-token in its user's state dir. For example: "
        f'`claude mcp add --transport http codepager {url} --header "Authorization: Bearer <token>"`, '
        f'or `curl -H "Authorization: Bearer <token>" ...`.'
    )
