"""The arguments every search tool shares, declared once: their names, types and descriptions.

The search tools differ only in the arguments that define a search; after those, each takes
the same eight (`SHARED`): which page (`cursor`, `page_size`), how it is shown (snippets, `detail`,
`output_mode`, size, stats) and the `jq_filter` view over the list. fastmcp builds a tool's input
schema, and validates each call, from the function's own signature, so each tool spells the eight
out, typed by the aliases below (those whose bounds or wording quote settings are built at
registration, in `server.tools.search`). `check_shared` refuses, at registration, a search tool
whose signature does not end with exactly these eight, in this order. Five of them make the call's
one `PageOptions` (`server.output`), `stats` as its two flags.

No `from __future__ import annotations` here: the aliases become the tools' parameter types, and
fastmcp must be able to evaluate them.
"""

import inspect
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import Field

from server.output import MIN_OUTPUT_TOKENS, OutputMode, PageOptions
from server.records import Detail
from server.tools.bounds import LongText
from server.tools.descriptions import OutputModeName

#: The shared parameters, in the order every search tool declares them, after its own.
SHARED = (
    "snippet_length", "page_size", "cursor", "output_mode", "max_output_tokens",
    "stats", "jq_filter", "detail",
)  # fmt: skip

# One short line each (the three search tools repeat them, and tools/list is paid for in every
# conversation); `page_size`, `snippet_length` and `cursor` quote settings, so theirs are built
# at registration.
OutputModeArg = Annotated[OutputModeName, Field(description="auto: too big -> file (results.file_ref); inline: cut")]
MaxOutputTokens = Annotated[int | None, Field(ge=MIN_OUTPUT_TOKENS, description="cap the page, in tokens")]
#: One argument, not two flags: "counts only" and "counts before the page" exclude each other.
StatsArg = Annotated[
    Literal["only", "first"] | None, Field(description="counts of the whole list: only, or atop the page")
]
JqFilter = Annotated[LongText | None, Field(description="jq over the match records, before paging")]
DetailName = Annotated[Literal["compact", "full"], Field(description="full: byte spans, language, ranks")]


def check_shared(name: str, body: Callable[..., Any]) -> list[str]:
    """The parameters of search tool `name` before the shared ones (its own, `ctx` left out);
    a TypeError at registration if its signature does not end with `SHARED`, in order."""
    parameters = [p for p in inspect.signature(body).parameters if p != "ctx"]
    own, shared = parameters[: -len(SHARED)], tuple(parameters[-len(SHARED) :])
    if shared != SHARED:
        raise TypeError(f"{name} must end with the shared parameters {SHARED}, not {shared}")
    return own


def page_options(
    snippet_length: int, output_mode: str, max_output_tokens: int | None, stats: str | None, detail: str
) -> PageOptions:
    """The call's `PageOptions`, from the shared arguments its input schema has validated."""
    return PageOptions(
        snippet_length=snippet_length,
        output_mode=OutputMode(output_mode),
        max_output_tokens=max_output_tokens,
        stats_only=stats == "only",
        stats_first=stats == "first",
        detail=Detail(detail),
    )
