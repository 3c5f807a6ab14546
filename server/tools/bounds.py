"""Bounds on our tools' arguments, checked before anything is done per item.

pydantic reports every wrong item of a list, and every unknown argument, as one error, and
formatting them is dear: a 3.6 MiB call of `include_patterns: [0, 0, ...]` (1.9M items) cost
19 s of the event loop and 2.3 GB to turn into errors that were then cut to ten, and 380,000
unknown argument names 3.8 s; every other client of the server waited as long. So each list
argument declares `maxItems` (pydantic checks a list's length before its items: one error), each
string argument `maxLength`, the filter object of `list-saved-datasets` refuses unknown keys as
one error (`server.sql.DatasetFilter`), and `ArgumentCount` refuses a call with more arguments
than any of our tools takes before pydantic sees it. The bounds are far above any honest call;
`tools/list` leaves them out (`server.tools.schemas.compact_schema`: the listing is paid for in
every conversation), and a call over one is refused as -32602 naming the argument and the bound.

A cursor is bounded by its codec instead: it refuses one longer than a sealed cursor can be
before reading it, and says how long it was.
"""

from collections.abc import Callable
from typing import Annotated, Any

from fastmcp import FastMCP
from fastmcp.server.middleware import Middleware, MiddlewareContext
from pydantic import AfterValidator, Field

from server.errors import InvalidParamsError
from server.tools.registry import own_tools

#: Globs in one include or exclude list (more than ripgrep's command line holds when long).
MAX_GLOBS = 1_000
#: A path, a glob, a dataset id or a filter's text: Linux's PATH_MAX.
MAX_PATH_CHARS = 4_096
#: A pattern, a query, a SQL statement or a jq program (ripgrep takes 128 KiB of pattern).
MAX_TEXT_CHARS = 256 * 1024
#: Arguments in one call of our tools: the widest, the search tools, take 19.
MAX_ARGUMENTS = 32


def _at_most(limit: int) -> AfterValidator:
    """The check of a string argument of at most `limit` characters. Counted in Python, not by
    pydantic's `max_length`, which refuses text that is not valid Unicode for that alone, before
    the tool can say what is wrong with it (a `path` no file system call can take is
    `invalid_path`); the schema declares it `maxLength` all the same."""

    def at_most(text: str) -> str:
        if len(text) > limit:
            raise ValueError(f"is {len(text):,} characters long, and at most {limit:,} are taken")
        return text

    return AfterValidator(at_most)


# The schema's bound as an extra key, not a `WithJsonSchema`, which would replace the schema of a
# parameter whole, its description with it.
PathText = Annotated[str, _at_most(MAX_PATH_CHARS), Field(json_schema_extra={"maxLength": MAX_PATH_CHARS})]
LongText = Annotated[str, _at_most(MAX_TEXT_CHARS), Field(json_schema_extra={"maxLength": MAX_TEXT_CHARS})]
Globs = Annotated[list[PathText] | None, Field(max_length=MAX_GLOBS)]


class ArgumentCount(Middleware):
    """Refuses a call of one of `app`'s own tools carrying more than `MAX_ARGUMENTS` arguments,
    before pydantic builds one error for each unknown name. Tools of a proxied server are left
    to that server, which declared them."""

    def __init__(self, app: FastMCP) -> None:
        self.app = app

    async def on_call_tool(self, context: MiddlewareContext[Any], call_next: Callable[..., Any]) -> Any:
        sent = len(context.message.arguments or {})
        if sent > MAX_ARGUMENTS and context.message.name in own_tools(self.app):
            raise InvalidParamsError(
                f"{sent:,} arguments sent, and no tool of this server takes more than {MAX_ARGUMENTS}: send only "
                f"the parameters in {context.message.name}'s input schema"
            )
        return await call_next(context)
