"""The arguments every search tool shares, declared once: their names, types and descriptions.

The search tools differ only in the arguments that define a search; after those, each takes
the same eight (`SharedArgs`): which page (`cursor`, `page_size`), how it is shown (snippets,
`detail`, `output_mode`, size, stats) and the `jq_filter` view over the list.

fastmcp builds a tool's input schema, and validates each call, from the function's signature as
`inspect.signature` reads it, which a function's `__signature__` sets. So a search tool's body
declares only its own parameters and takes the shared ones as `**shared`; `with_shared` gives it
the signature its schema is built from: its own parameters, then `shared_parameters(...)`. A call
is validated against all of them before the body runs, so `**shared` always holds the eight, each
valid or at its default, and `SharedArgs(**shared)` reads them typed.

No `from __future__ import annotations` here: the aliases become the tools' parameter types, and
fastmcp must be able to evaluate them.
"""

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field

from server.output import MIN_OUTPUT_TOKENS, OutputMode, PageOptions
from server.records import Detail
from server.tools.bounds import LongText
from server.tools.descriptions import OutputModeName

#: One argument, not two flags: "counts only" and "counts before the page" exclude each other.
StatsName = Literal["only", "first"]
DetailName = Literal["compact", "full"]

#: The most characters of each match's text a call may ask for.
MAX_SNIPPET_LENGTH = 2000


@dataclass(frozen=True, slots=True, kw_only=True)
class SharedArgs:
    """The shared arguments of one call, as its input schema validated them (fields in the order
    the schema lists them)."""

    snippet_length: int
    page_size: int | None
    cursor: str | None
    output_mode: OutputModeName
    max_output_tokens: int | None
    stats: StatsName | None
    jq_filter: str | None
    detail: DetailName

    def page_options(self) -> PageOptions:
        """The call's `PageOptions`: the five arguments that say how its page is shown."""
        return PageOptions(
            snippet_length=self.snippet_length,
            output_mode=OutputMode(self.output_mode),
            max_output_tokens=self.max_output_tokens,
            stats_only=self.stats == "only",
            stats_first=self.stats == "first",
            detail=Detail(self.detail),
        )


#: The shared parameters' names, in the order every search tool's schema lists them, after its own.
SHARED = tuple(f.name for f in dataclasses.fields(SharedArgs))


def shared_parameters(*, snippet_length: int, max_page_size: int, cursor: str) -> list[inspect.Parameter]:
    """The shared parameters, as a search tool's signature lists them after its own: one short
    line of description each (tools/list is paid for in every conversation). The tool's default
    `snippet_length`, the page size limit and the cursor's description (its lifetime) are the
    caller's."""
    types: dict[str, tuple[Any, Any]] = {
        "snippet_length": (
            Annotated[int, Field(ge=0, le=MAX_SNIPPET_LENGTH, description="max chars of each text; 0: none")],
            snippet_length,
        ),
        "page_size": (Annotated[int | None, Field(ge=1, le=max_page_size, description="results per page")], None),
        "cursor": (Annotated[str | None, Field(description=cursor)], None),
        "output_mode": (
            Annotated[OutputModeName, Field(description="auto: too big -> file (results.file_ref); inline: cut")],
            "auto",
        ),
        "max_output_tokens": (
            Annotated[int | None, Field(ge=MIN_OUTPUT_TOKENS, description="cap the page, in tokens")],
            None,
        ),
        "stats": (
            Annotated[StatsName | None, Field(description="counts of the whole list: only, or atop the page")],
            None,
        ),
        "jq_filter": (Annotated[LongText | None, Field(description="jq over the match records, before paging")], None),
        "detail": (Annotated[DetailName, Field(description="full: byte spans, language, ranks")], "compact"),
    }
    assert tuple(types) == SHARED
    return [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
        for name, (annotation, default) in types.items()
    ]


Body = TypeVar("Body", bound=Callable[..., Any])


def with_shared(parameters: list[inspect.Parameter]) -> Callable[[Body], Body]:
    """Give a search tool's body (its own parameters, then `**shared`) the signature fastmcp
    builds its schema from and validates its calls by: its own parameters, then `parameters`."""

    def declare(body: Body) -> Body:
        own = inspect.signature(body)
        kept = [p for p in own.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        if len(kept) == len(own.parameters):
            raise TypeError(f"{body.__name__} must take the shared parameters as **shared")
        signature = own.replace(parameters=[*kept, *parameters])
        body.__signature__ = signature  # type: ignore[attr-defined]
        body.__annotations__ = {
            **{p.name: p.annotation for p in signature.parameters.values()},
            "return": own.return_annotation,
        }
        return body

    return declare
