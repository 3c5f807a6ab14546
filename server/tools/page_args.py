"""The arguments every search tool shares, declared once: the fields of `PageArgs`.

The three search tools differ only in the arguments that define a search; after those, each takes
the same ten: which page (`cursor`, `page_size`), how it is shown (snippets, `detail`,
`output_mode`, size, stats) and the `jq_filter` view over the list. fastmcp builds a tool's input
schema, and validates each call, from the function's signature; `with_page_args` gives a tool body
the signature fastmcp should see (the body's own parameters, then these ten) and hands the ten to
the body as one `PageArgs`. So the schema is the one spelled-out signatures gave, and a new shared
option is one field here instead of one parameter in each tool.

No `from __future__ import annotations` here: the fields' annotations become the tools' parameter
types, and fastmcp must be able to evaluate them.
"""

import functools
import inspect
from dataclasses import dataclass, fields
from typing import Annotated, Any, Literal, get_type_hints

from fastmcp.tools.base import ToolResult
from pydantic import Field

from server.output import MIN_OUTPUT_TOKENS
from server.records import Detail
from server.rendering import OutputOptions
from server.response import RecordOptions
from server.tools.bounds import LongText
from server.tools.descriptions import OutputModeName
from server.tools.registry import ToolBody


@dataclass(frozen=True, slots=True)
class PageArgs:
    """The shared arguments of one search tool call, in the order the tools declare them.

    `page_size` and `snippet_length` are bounded by settings, `cursor`'s description says how
    long a cursor lives (a setting), and the default snippet length differs between regex and
    ranked search (the 0 below is never used): `page_parameters` adds those at registration."""

    # One short line each (the three search tools repeat them, and tools/list is paid for in
    # every conversation); `page_parameters` adds the ones that quote settings.
    include_snippet: Annotated[bool, Field(description="false: locations only")] = True
    snippet_length: int = 0
    page_size: int | None = None
    cursor: str | None = None
    output_mode: Annotated[
        OutputModeName,
        Field(description="auto: too big -> file (results.file_ref); inline: cut"),
    ] = "auto"
    max_output_tokens: Annotated[int | None, Field(ge=MIN_OUTPUT_TOKENS, description="cap the page, in tokens")] = None
    stats_only: Annotated[bool, Field(description="counts per file, no matches")] = False
    stats_first: Annotated[bool, Field(description="counts and matches")] = False
    jq_filter: Annotated[LongText | None, Field(description="jq over the match records, before paging")] = None
    detail: Annotated[Literal["compact", "full"], Field(description="full: byte spans, language, ranks")] = "compact"

    def record_options(self) -> RecordOptions:
        """`legacy` prints the seed-compatible records whatever `detail` says: it exists for
        clients written against that shape."""
        level = Detail.FULL if self.output_mode == "legacy" else Detail(self.detail)
        return RecordOptions(self.include_snippet, self.snippet_length, level)

    def output_options(self) -> OutputOptions:
        return OutputOptions(self.output_mode, self.max_output_tokens, self.stats_only, self.stats_first)


def page_parameters(bounded: dict[str, Any], snippet_length: int) -> list[inspect.Parameter]:
    """`PageArgs`' fields as tool parameters: `bounded` replaces the types of the fields whose
    declaration quotes settings (`page_size`, `snippet_length`, `cursor`), `snippet_length` is
    this tool's default."""
    types = get_type_hints(PageArgs, include_extras=True) | bounded
    defaults = {f.name: f.default for f in fields(PageArgs)} | {"snippet_length": snippet_length}
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return [inspect.Parameter(name, kind, default=value, annotation=types[name]) for name, value in defaults.items()]


def with_page_args(body: ToolBody, shared: list[inspect.Parameter]) -> ToolBody:
    """The tool fastmcp registers for `body`, whose `page_args: PageArgs` parameter stands for
    `shared`: its signature is the body's own parameters followed by `shared`, and a call's
    shared arguments reach the body gathered into one `PageArgs`."""
    own = inspect.signature(body)
    parameters = [p for p in own.parameters.values() if p.name != "page_args"]
    signature = own.replace(parameters=[*parameters, *shared])
    names = [p.name for p in shared]

    @functools.wraps(body)  # its name, which validation errors quote
    async def tool(**arguments: Any) -> ToolResult:
        page_args = PageArgs(**{name: arguments.pop(name) for name in names})
        return await body(**arguments, page_args=page_args)

    # What fastmcp and pydantic read a function's parameters from (inspect.signature honours
    # `__signature__` before following `__wrapped__`; type hints come from `__annotations__`).
    tool.__signature__ = signature  # type: ignore[attr-defined]
    tool.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
    tool.__annotations__["return"] = own.return_annotation
    return tool
