"""One place that decides how a failure reaches the agent.

Two kinds of failure:

* **Refusals**: the call itself is wrong and must not be retried as is — a tampered, foreign,
  expired or stale cursor, arguments of the wrong type, out of range or unknown. Their channel
  depends on the protocol version the client negotiated. Up to MCP 2025-06-18 they are protocol
  errors, JSON-RPC `-32602 Invalid params`. From 2025-11-25 the spec answers input validation
  errors as tool execution errors, so the model sees them and can correct its call: an `isError`
  result. Either way they carry the same `code` and `hint` (in the error's `data`, or in the
  result's `error` object). An unknown tool stays a protocol error at every version, as the spec
  says. fastmcp 4 masks exceptions raised in a tool body into `isError` results, so tool bodies
  raise `InvalidParamsError` (a `ToolError`, which fastmcp re-raises untouched) and
  `ErrorMiddleware`, which knows the call's protocol version, answers it on its channel.
* **Tool errors** (`isError: true` result): the call was well-formed but the search cannot be
  done — an invalid regex, a path outside the roots, a timeout, an index still building, the
  shared session store (Redis) unreachable. The result carries a structured `error` object
  (code, message, hint) so an agent can act on it.

The server's own failures are `ServerError`s: each class says its `code` and `hint`, so the
most specific class answers by inheritance, with no list to keep in order. The exceptions of
the layers below (the engine's, the session store's, `infra`'s) cannot derive from it (imports
flow server -> sessions -> search_engine -> infra), so a table maps them instead:
`_MAPPED_ERRORS` for tool errors, `_CURSOR_REFUSALS` for cursor refusals.

Every message says what to do next.

The engine's, the session store's and `infra`'s own exceptions are documented in
`search_engine.errors`, `sessions.errors` and `infra.errors`. Two server exceptions stay beside
their only user, because importing this module (fastmcp) would cost them what they exist to
avoid: `server.transports.framing.FrameRejected` (one refused frame line, caught inside the pure
framing module, which the settings import) and `server.cli.search_targets.MissingPathError` (a
PATH `codepager search` cannot read; the grep-like CLI never imports fastmcp).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ParamSpec

import pydantic
from fastmcp.exceptions import NotFoundError, ToolError, ValidationError
from fastmcp.server.middleware import Middleware, MiddlewareContext
from fastmcp.tools.base import ToolResult
from mcp import MCPError
from mcp_types import INVALID_PARAMS
from mcp_types.version import is_version_at_least

from infra import UnsafeDirectoryError
from search_engine import (
    IndexDamagedError,
    IndexNotReadyError,
    IndexStoreError,
    InvalidQueryError,
    ModelLoadError,
    PathError,
    SearchError,
    SearchTimeoutError,
)
from server.json_result import json_result
from server.validation_problems import validation_problems
from sessions import (
    CursorError,
    CursorExpiredError,
    CursorGenerationError,
    CursorParamsMismatchError,
    CursorTooLargeError,
    SessionStoreUnavailableError,
)

P = ParamSpec("P")

#: An error message echoing what it was given (DuckDB's the SQL or the data, a proxied server's
#: whatever it likes) is clipped to this many characters: an error is not under the output
#: budget a result is, and it goes into the agent's context whole.
MAX_ERROR_CHARS = 2000


class ServerError(Exception):
    """A failure of this server's own that reaches the agent: a stable `code` and a `hint` saying
    what to do next, both set by each subclass in its body. A subclass's own override its
    parent's, so the most specific class answers without a table kept in order by hand (the
    errors of the layers below, which the server cannot subclass, are mapped in
    `_MAPPED_ERRORS`). Each keeps the built-in exception it is a kind of (a bad id is a
    `ValueError`, an unknown one a `LookupError`) as a second base, for callers that catch it."""

    code: str
    hint: str


# -- output layer and proxy failures ------------------------------------------------------------
# Writing: `PrivateFileError` (a directory or file that cannot be used safely) is what the file
# primitives raise; the stores turn it into `StoreWriteError`, after which the caller answers
# inline instead (the layer cuts the page to fit, the proxy sends the start of the result).
# Neither reaches the agent, so neither is a `ServerError`; nor are `LineRangeError` and
# `ReadTooLargeError`, which only a resource read raises, answered as -32602 with the message
# alone (a resource has no `isError` result to carry a code). Reading and querying: the rest are
# the agent's to fix and become `isError` results below.


class PrivateFileError(RuntimeError):
    """A directory or file could not be used safely; the message says which and why."""


class StoreWriteError(RuntimeError):
    """A page or dataset could not be written; the caller answers inline, with a warning."""


class LineRangeError(ValueError):
    """A line range of an offloaded page that is not 1-based start <= end, or past its end."""


class ReadTooLargeError(ValueError):
    """A read of an offloaded page (whole, or a line range) larger than one answer may be."""


class InvalidDatasetIdError(ServerError, ValueError):
    """An id that cannot name a stored result (it must be a 26-character ULID)."""

    code = "invalid_dataset_id"
    hint = "pass an id exactly as list-saved-datasets shows it"


class DatasetNotFoundError(ServerError, LookupError):
    """No stored result has this id (never written, expired, or cleaned up)."""

    code = "dataset_not_found"
    hint = "the dataset expired or was removed; run the search again to recreate it"


class SqlRejectedError(ServerError, ValueError):
    """The SQL is not a single read-only statement, or does not parse."""

    code = "sql_rejected"
    hint = "send one read-only statement (SELECT, WITH, DESCRIBE, SUMMARIZE, SHOW, EXPLAIN) over dataset_<id> views"


class SqlExecutionError(ServerError, ValueError):
    """The SQL was accepted but failed (unknown column, type error, permission, memory)."""

    code = "sql_failed"
    hint = "check table and column names with list-saved-datasets and DESCRIBE dataset_<id>"


class SqlTimeoutError(SqlExecutionError, TimeoutError):
    """The SQL ran past its time limit, or waited that long for its turn."""

    code = "sql_timeout"
    hint = "add filters or LIMIT, or aggregate, and try again"


class SqlResultTooLargeError(SqlExecutionError):
    """The result is over what the requested output mode can return whole."""

    code = "sql_result_too_large"
    hint = "add LIMIT/OFFSET or select fewer columns, or call with output_mode=auto"


class JqFilterError(ServerError, ValueError):
    """The filter was refused, did not compile, failed at run time, or ran too long."""

    code = "invalid_jq_filter"
    hint = (
        "fix the jq_filter: it runs over the array of match records the pages show ({path, line, text} unless "
        'detail="full") and must keep some of them as they are, e.g. map(select(.path | startswith("src/")))'
    )


class JqTimeoutError(JqFilterError, TimeoutError):
    """The filter ran past its time limit, or waited that long for a worker."""

    code = "jq_timeout"
    hint = (
        "simplify the jq_filter (it ran past its time limit) or page without it; one that waited for a worker can be "
        "tried again"
    )


class BackendResultError(ServerError, RuntimeError):
    """A proxied backend answered with something that is not an MCP tool result: its fault,
    not the client's arguments (fastmcp reports it as -32602 "Invalid request parameters")."""

    code = "backend_result_invalid"
    hint = (
        "the backend server's answer was malformed, not your arguments: retry, call another tool, or report it "
        "to the backend's maintainers"
    )


#: The codes of a refusal (a call invalid as sent) and what to do next, in either channel.
REFUSALS: dict[str, str] = {
    "invalid_arguments": "fix the arguments the message names (the tool's input schema describes each) and call again",
    "invalid_cursor": "pass pagination.next_cursor back exactly as it was returned, to the tool that returned it, or "
    "run the search again without a cursor",
    "cursor_expired": "run the same search again without a cursor",
    "cursor_mismatch": "send only the cursor (it remembers the search), or leave it out to start the new search",
    "results_changed": "run the search again without a cursor; its results may have shifted",
    "search_too_large": "shorten the query, path, globs or jq_filter, or split the search",
}
#: The refusal code of each cursor refusal that is not `invalid_cursor`.
_CURSOR_REFUSALS: tuple[tuple[type[CursorError], str], ...] = (
    (CursorExpiredError, "cursor_expired"),
    (CursorParamsMismatchError, "cursor_mismatch"),
    (CursorGenerationError, "results_changed"),
    (CursorTooLargeError, "search_too_large"),
)
#: The first protocol version whose clients get refusals as tool execution errors (SEP-1303).
REFUSALS_AS_TOOL_ERRORS_SINCE = "2025-11-25"


class InvalidParamsError(ServerError, ToolError):
    """Raised in a tool body for a call that is invalid as sent: a refusal, answered by
    `ErrorMiddleware` on the channel of the client's protocol version. Its `code` is the one
    `ServerError` chosen per call: one of `REFUSALS` (`invalid_arguments` unless given), with
    that code's hint."""

    code = "invalid_arguments"
    hint = REFUSALS[code]

    def __init__(self, message: str, data: dict[str, Any] | None = None, *, code: str = "invalid_arguments") -> None:
        super().__init__(message, log_level=logging.DEBUG)
        self.message = message
        self.code = code
        self.hint = REFUSALS[code]
        self.data = {"code": code, "hint": self.hint, **(data or {})}

    @classmethod
    def of_cursor(cls, exc: CursorError) -> InvalidParamsError:
        code = next((c for t, c in _CURSOR_REFUSALS if isinstance(exc, t)), "invalid_cursor")
        return cls(str(exc), {"reason": type(exc).__name__}, code=code)


#: The tool errors of the layers below (the engine's, the session store's, `infra`'s), which the
#: server cannot subclass (imports flow server -> sessions -> search_engine -> infra):
#: (exception type, stable code, what to do next).
#: Most specific first, as the first entry an error is an instance of answers it;
#: tests/test_errors.py checks that no entry is shadowed by an earlier one.
_MAPPED_ERRORS: tuple[tuple[type[Exception], str, str], ...] = (
    (
        SessionStoreUnavailableError,
        "session_store_unavailable",
        "retry the same call in a few seconds; the cursor stays valid",
    ),
    (InvalidQueryError, "invalid_query", "fix the pattern or query and call again without a cursor"),
    (PathError, "invalid_path", "pass a path inside the server's roots (or omit `path`)"),
    (SearchTimeoutError, "timeout", "narrow the search with `path` or `include_patterns` and try again"),
    (
        IndexNotReadyError,
        "index_not_ready",
        "indexing is running in the background; retry after progress.eta_s seconds (or a few, if null), or use "
        "regex_search meanwhile",
    ),
    (ModelLoadError, "model_unavailable", "check the index.model setting; regex_search still works"),
    (
        IndexDamagedError,
        "index_damaged",
        "the index on disk was found damaged even after a rebuild: call reindex with full=true, and check the "
        "disk under index.cache_dir; regex_search still works",
    ),
    (
        UnsafeDirectoryError,
        "cache_dir_refused",
        "point index.cache_dir at a directory of this user's that others cannot write in (codepager creates it "
        "0700) and restart the server; regex_search still works",
    ),
    (
        IndexStoreError,
        "index_unavailable",
        "make index.cache_dir writable (or point it elsewhere) and call reindex; regex_search still works",
    ),
    (SearchError, "search_failed", "adjust the request and try again"),
)
#: What a tool body may raise that becomes an `isError` result.
HANDLED_ERRORS: tuple[type[Exception], ...] = (ServerError, *(t for t, _, _ in _MAPPED_ERRORS))


def server_errors(base: type[ServerError] = ServerError) -> list[type[ServerError]]:
    """Every subclass of `base`, each before its own subclasses, in the order they were defined."""
    return [cls for sub in base.__subclasses__() for cls in (sub, *server_errors(sub))]


#: Every `isError` code and what to do next: the mapped errors', then the server's own.
TOOL_ERRORS: dict[str, str] = {code: hint for _, code, hint in _MAPPED_ERRORS} | {
    cls.code: cls.hint for cls in server_errors() if not issubclass(cls, InvalidParamsError)
}


def error_result(exc: Exception) -> ToolResult:
    """An `isError` result whose structuredContent says what went wrong and what to do."""
    if isinstance(exc, ServerError):
        code, hint = exc.code, exc.hint
    else:
        code, hint = next((c, h) for t, c, h in _MAPPED_ERRORS if isinstance(exc, t))
    error: dict[str, Any] = {"code": code, "message": str(exc), "hint": hint}
    if isinstance(exc, InvalidQueryError) and exc.position is not None:
        error["position"] = exc.position
    if isinstance(exc, IndexNotReadyError):
        error["progress"] = {"phase": exc.phase, "done": exc.done, "total": exc.total, "eta_s": exc.eta_s}
    return json_result({"error": error}, is_error=True)


def tool_errors(fn: Callable[P, Awaitable[ToolResult]]) -> Callable[P, Awaitable[ToolResult]]:
    """Wrap a tool body: cursor refusals become refusals (`InvalidParamsError`), the other
    `HANDLED_ERRORS` an `isError` result. Anything else is a bug and is left for fastmcp to report."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> ToolResult:
        try:
            return await fn(*args, **kwargs)
        except CursorError as exc:
            raise InvalidParamsError.of_cursor(exc) from exc
        except InvalidParamsError:
            raise  # a refusal: ErrorMiddleware answers it on the channel of the call's protocol version
        except HANDLED_ERRORS as exc:
            return error_result(exc)

    return wrapper


#: Tools this server used to list, and the call that does their work now: an agent that knows
#: the old name (from its memory, or a user's notes) learns the new call from the refusal.
FORMER_TOOLS = {
    "semantic_search": 'hybrid_search with mode="semantic"',
    "cleanup_temp_files": "none: offloaded files expire on their own after offload.retention_hours",
}


class ErrorMiddleware(Middleware):
    """Answers refusals (`InvalidParamsError`, and the argument-validation failures fastmcp raises
    before a tool body runs) on the channel of the call's protocol version: a JSON-RPC -32602 on
    the wire, where fastmcp would otherwise mask it, or from MCP 2025-11-25 an `isError` result."""

    async def on_call_tool(self, context: MiddlewareContext[Any], call_next: Callable[..., Any]) -> Any:
        try:
            return await call_next(context)
        except InvalidParamsError as exc:
            refusal = exc
        except ValidationError as exc:
            refusal = invalid_arguments(exc)
        except NotFoundError as exc:
            # The MCP spec lists an unknown tool as a protocol error (-32602); fastmcp would
            # answer with an isError result instead.
            former = FORMER_TOOLS.get(context.message.name)
            advice = f"use {former}" if former else "call tools/list for the tools this server offers"
            raise MCPError(code=INVALID_PARAMS, message=f"{exc}: {advice}") from exc
        if _refusals_are_tool_errors(context):
            return json_result(
                {"error": {"code": refusal.code, "message": refusal.message, **refusal.data}}, is_error=True
            )
        raise MCPError(code=INVALID_PARAMS, message=refusal.message, data=refusal.data) from refusal


def _refusals_are_tool_errors(context: MiddlewareContext[Any]) -> bool:
    """Whether the client negotiated a protocol version that answers refusals as tool execution
    errors. A version this SDK does not know, or none (no request context), keeps -32602."""
    request = context.fastmcp_context.request_context if context.fastmcp_context is not None else None
    return request is not None and is_version_at_least(request.protocol_version, REFUSALS_AS_TOOL_ERRORS_SINCE)


def invalid_arguments(exc: ValidationError, notes: Sequence[str] = ()) -> InvalidParamsError:
    """The refusal of arguments fastmcp found invalid, naming every problem, each `note` after
    them (what the arguments were probably meant to be)."""
    said = "".join(f" ({note})" for note in notes)
    refusal = InvalidParamsError(f"invalid arguments: {_problems(exc)}{said}; check the tool's input schema")
    refusal.__cause__ = exc
    return refusal


def _problems(exc: BaseException) -> str:
    """Every problem with the arguments, one `name: what is wrong` each: the first lines of
    pydantic's report hid all but its first error, so a union such as list-saved-datasets'
    `filter` (a string or an object) said only that an object is not a string."""
    cause = exc.__cause__ or exc
    if isinstance(cause, pydantic.ValidationError):
        return "; ".join(validation_problems(cause, shown=lambda _: False))
    text = str(cause)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and "errors.pydantic.dev" not in ln]
    return " ".join(lines[:3]) if lines else type(exc).__name__
