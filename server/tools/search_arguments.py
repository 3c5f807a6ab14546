"""What the arguments of a search tool call were: which were sent, and what a misnamed one is
called here.

One middleware over every tools/call, because a tool body cannot see either: in a body, a
parameter left out and one sent at its default look the same (only the ones sent must match a
cursor's search), and an argument the tool does not take never reaches it (fastmcp refuses the
call first, saying only "Unexpected keyword argument"). The search tools name some
parameters differently (`pattern` for regex, `query` for ranked search), and an agent that has
just used one sends the other's name; so an unknown argument that is a parameter of a sibling
search tool is explained by a note on the refusal: what this tool calls it, or that it has no
such option. An argument the tools used to take is refused with what says the same now.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Any

from fastmcp.exceptions import ValidationError
from fastmcp.server.middleware import Middleware, MiddlewareContext

from server.errors import invalid_arguments

#: The names of the arguments the current tools/call carried (with a non-null value).
_SENT: ContextVar[frozenset[str]] = ContextVar("codepager_sent_arguments", default=frozenset())


def sent_arguments() -> frozenset[str]:
    """The arguments the current tools/call carried with a value other than null."""
    return _SENT.get()


#: Arguments the search tools used to take, and what says the same now.
FORMER_ARGUMENTS = {
    "include_snippet": "`include_snippet` is gone: snippet_length=0 leaves the text out",
    "stats_only": '`stats_only` is now stats="only"',
    "stats_first": '`stats_first` is now stats="first"',
}


class SearchArguments(Middleware):
    """Records which arguments a tools/call carried (a null counts as not sent: some clients send
    every optional parameter, unset ones as null), and notes, on a refusal of a search tool's
    arguments, what it calls an argument meant for a sibling.

    `parameters` maps each search tool to its search-defining parameters, each by the request
    field it sets (`pattern` and `query` both set the query): filled in as the tools register."""

    def __init__(self) -> None:
        self.parameters: dict[str, dict[str, str]] = {}

    def add_tool(self, name: str, parameters: Iterable[str], field_of: Callable[[str], str]) -> None:
        self.parameters[name] = {p: field_of(p) for p in parameters}

    async def on_call_tool(self, context: MiddlewareContext[Any], call_next: Callable[..., Any]) -> Any:
        arguments = context.message.arguments or {}
        token = _SENT.set(frozenset(name for name, value in arguments.items() if value is not None))
        try:
            return await call_next(context)
        except ValidationError as exc:
            notes = self.notes(context.message.name, arguments)
            if notes:
                raise invalid_arguments(exc, notes) from exc
            raise
        finally:
            _SENT.reset(token)

    def notes(self, tool: str, arguments: Iterable[str]) -> list[str]:
        """One note per argument `tool` does not take that a sibling search tool does, or that
        the search tools used to take."""
        own = self.parameters.get(tool)
        if own is None:
            return []
        notes = []
        for argument in arguments:
            if argument in FORMER_ARGUMENTS:
                notes.append(FORMER_ARGUMENTS[argument])
                continue
            owners = [t for t, params in self.parameters.items() if argument in params and argument not in own]
            if not owners:
                continue
            field = self.parameters[owners[0]][argument]
            here = next((p for p, f in own.items() if f == field), None)
            whose = " and ".join(owners)
            notes.append(
                f"use `{here}`: {tool}'s name for what {whose} {'call' if len(owners) > 1 else 'calls'} `{argument}`"
                if here is not None
                else f"`{argument}` is an option of {whose} only"
            )
        return notes
