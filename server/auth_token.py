"""Which token HTTP requests need: secure by default.

Binding loopback keeps other machines out, not other users of this one: with no token, any
local user could call the tools, and read through them what the roots hold however private
their directories are to that user (or, behind `codepager proxy`, call the backend's tools).
So HTTP always has a token unless the user opts out by name (`--no-auth`, warned about):

- a configured one (`--auth-token`, `CODEPAGER_SERVER__AUTH_TOKEN`) wins;
- else the one kept in `token_file()` (in the user's state dir), generated on first
  start (`infra.SecretFile`: 0600 from its creation, published atomically, in a
  directory others cannot write in) and read again at each start, so a client registered with
  it keeps working; deleting the file and restarting rotates it;
- if that file cannot be written or read (a read-only home), one for this process only, with a
  warning: still no open door.

At start the server prints, on stderr, the `claude mcp add ... --header` line that connects a
client (server/cli/serve_cmd.py `serve_app`), with the token itself unless it was configured:
the user already has that one, and configured secrets are never echoed (`SECRET_SETTINGS`).
stdio needs none of this: whoever can write to the process's stdin already runs as the user.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from infra import MIN_SECRET_LENGTH, SecretFile, check_own_dir
from server.settings import ServerSettings
from server.transports.http_origin import is_loopback

#: The token file's temporary names while it is published (`SecretFile.temp_prefix`).
TOKEN_TEMP_PREFIX = ".http-token."

log = logging.getLogger(__name__)


def token_file() -> Path:
    """Where the generated token is kept: `http-token` in the user's state dir, where codepager
    keeps what it generates for itself (`~/.local/state/codepager` on Linux, moved by
    XDG_STATE_HOME). Not a setting (it was `server.auth_token_file`): every HTTP server of the
    user shares the file, and a user who wants a token of their own sets `server.auth_token`."""
    return Path(platformdirs.user_state_dir("codepager", appauthor=False)) / "http-token"


@dataclass(frozen=True, slots=True)
class HttpToken:
    """The token HTTP requests need, and what the start-up line says of it."""

    value: str
    source: str
    """Where it comes from and how to change it, e.g. "kept in ~/.local/state/codepager/http-token ..."."""
    shown: bool
    """Whether the start-up line prints it: not when it was configured."""


def bearer_token(settings: ServerSettings) -> HttpToken | None:
    """The token HTTP requests need; None when nothing is checked (not HTTP, or `no_auth`),
    with a warning for every risky set-up. ValueError (saying what to do) when the token file
    or its directory is one others could have planted."""
    if settings.transport != "http":
        if settings.auth_token:
            log.warning("server.auth_token only applies to --transport http; it is ignored on %s", settings.transport)
        return None
    if settings.no_auth:
        reach = "every user of this machine" + (
            "" if is_loopback(settings.host) else f" and anyone who can reach {settings.host}"
        )
        log.warning(
            "--no-auth: serving HTTP without a token: %s can call the tools (search and read everything under the "
            "roots, or call the proxied backend's tools). Drop --no-auth (server.no_auth) to have a token generated "
            "and kept in %s, or set --auth-token.",
            reach,
            token_file(),
        )
        return None
    if settings.auth_token is not None:
        if len(settings.auth_token) < MIN_SECRET_LENGTH:
            log.warning(
                "server.auth_token is only %d characters; use e.g. `python -c 'import secrets; "
                "print(secrets.token_urlsafe(32))'`",
                len(settings.auth_token),
            )
        return HttpToken(settings.auth_token, "set in server.auth_token (--auth-token)", shown=False)
    return _kept_token()


def _kept_token() -> HttpToken:
    """The token kept in `token_file()`, generated into it on first start."""
    path = token_file()
    check_own_dir(path.parent, "the HTTP token file's directory")  # a token planted there would be its planter's
    secret = SecretFile(
        path,
        temp_prefix=TOKEN_TEMP_PREFIX,
        label="the HTTP token file",
        remedy="delete it to have a new token generated (clients then need the new one), or set --auth-token",
    )
    try:
        value = secret.load_or_create()
    except OSError as exc:
        log.warning(
            "could not keep the HTTP token in %s (%s); using one for this process only: clients need the new one "
            "after every restart. Make that directory writable (XDG_STATE_HOME moves it), or set --auth-token.",
            path,
            exc.strerror or exc,
        )
        return HttpToken(secrets.token_urlsafe(32), "made for this process only", shown=True)
    return HttpToken(value, f"kept in {path} (delete that file and restart to rotate it)", shown=True)


def how_to_connect(settings: ServerSettings, name: str, token: HttpToken) -> str:
    """What the server prints on stderr at start: where its token comes from, and the exact
    command that registers it with Claude Code (`name` is the app's, e.g. codepager-proxy)."""
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    url = f"http://{host}:{settings.port}/mcp"
    bearer = token.value if token.shown else "<token>"
    return (
        f"codepager: HTTP requests need this server's token, {token.source}. Connect a client with:\n"
        f'  claude mcp add --transport http {name} {url} --header "Authorization: Bearer {bearer}"'
    )
