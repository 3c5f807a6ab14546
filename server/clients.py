"""What each MCP client will show of a tool result, so a page is cut to fit what its client shows.

Clients differ (measured from their sources and docs, 2026):

| client (`clientInfo.name` contains) | shows the model | limit |
|---|---|---|
| `claude-code` (Claude Code) | structuredContent only | 25,000 tokens (larger results go to a file) |
| `codex` (Codex CLI, `codex-mcp-client`) | structuredContent, serialized | 10 KiB and 256 lines |
| `cursor` (Cursor) | the text block | the server default |
| anything else, or no clientInfo | either | the server default (`offload.max_tokens`, `MAX_ANSWER_BYTES`) |

The name comes from `initialize`'s `clientInfo`, read on every request: on the stateless
2026 protocol there is no handshake and each request's `_meta` carries `clientInfo` (optional
there), so a request without it is served as an unknown client. `offload.clients` in the
settings overrides or extends the table; `max_output_tokens` on a call lowers the ceiling
further, never raises it.

`reads` decides the text block: a client that shows only structuredContent gets a one-line
header as text (the matches would be a second copy it never shows); every other client gets
the grep-like rendering of the page too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from server.output import MAX_ANSWER_BYTES, Ceiling
from server.settings import ClientBudget, OffloadSettings

Reads = Literal["structured", "text", "both"]

#: The built-in table; keys are matched as substrings of the lower-cased `clientInfo.name`,
#: first match wins.
BUILTIN: dict[str, ClientBudget] = {
    "claude-code": ClientBudget(max_tokens=25_000, reads="structured"),
    "codex": ClientBudget(max_bytes=10 * 1024, max_lines=256, reads="structured"),
    "cursor": ClientBudget(reads="text"),
}


@dataclass(frozen=True, slots=True)
class ClientProfile:
    """The client behind one request: its table entry (or "unknown") and its ceiling."""

    key: str
    ceiling: Ceiling
    reads: Reads

    @property
    def shows_text(self) -> bool:
        return self.reads != "structured"


def profile_for(client_name: str | None, settings: OffloadSettings) -> ClientProfile:
    """The profile of the client named `client_name` (None: unknown)."""
    default = Ceiling(tokens=settings.max_tokens, bytes=MAX_ANSWER_BYTES)
    table = {**BUILTIN, **settings.clients}
    name = (client_name or "").lower()
    for key, budget in table.items():
        if name and key.lower() in name:
            return ClientProfile(key, _ceiling(budget, default), budget.reads)
    return ClientProfile("unknown", default, "both")


def _ceiling(budget: ClientBudget, default: Ceiling) -> Ceiling:
    """The client's limits, each falling back to the server default; a byte limit with no
    token limit also bounds tokens (a token is at least one byte)."""
    tokens = budget.max_tokens if budget.max_tokens is not None else default.tokens
    if budget.max_tokens is None and budget.max_bytes is not None:
        tokens = min(tokens, budget.max_bytes)
    return Ceiling(
        tokens=tokens,
        bytes=budget.max_bytes if budget.max_bytes is not None else default.bytes,
        lines=budget.max_lines,
    )


def client_name(ctx: Any) -> str | None:
    """`clientInfo.name` of the request `ctx` serves, or None when the client sent none (or
    there is no request, e.g. a direct call in a test)."""
    try:
        params = ctx.session.client_params
    except (AttributeError, RuntimeError):
        return None
    info = getattr(params, "client_info", None)
    name = getattr(info, "name", None)
    return name if isinstance(name, str) else None
