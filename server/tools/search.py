"""The search tools: `regex_search`, `semantic_search`, `hybrid_search`.

Each is a thin adapter: validate arguments -> `SearchRequest` -> `Pager` -> output layer ->
`ToolResult`. The three share every paging and presentation parameter; only the search-defining
ones differ, so the shared part is declared once as annotated types and handled by
`run_search`.

No `from __future__ import annotations` here: the parameter types are built at registration
time from settings (page-size limits), and fastmcp must be able to evaluate them.
"""


from typing import Annotated, Any

import anyio
from fastmcp import Context, FastMCP
from fastmcp.tools.base import ToolResult
from pydantic import Field, ValidationError

from search_engine.models import MAX_CONTEXT_LINES, SearchMode, SearchRequest
from search_engine.paths import resolve_search_path
from server.output import MIN_OUTPUT_TOKENS
from server.errors import InvalidParamsError, tool_errors
from server.rendering import OutputOptions
from server.response import RecordOptions, SearchResponse
from server.services import Services
from server.tools.descriptions import (
    HYBRID_DESCRIPTION,
    REGEX_DESCRIPTION,
    SEMANTIC_DESCRIPTION,
    search_annotations,
    search_meta,
)

IncludeGlobs = Annotated[list[str] | None, Field(description="search only files matching these globs (ripgrep --glob syntax), e.g. ['*.py', 'src/**']")]
ExcludeGlobs = Annotated[list[str] | None, Field(description="skip files matching these globs, e.g. ['tests/**']")]
Cursor = Annotated[
    str | None,
    Field(description="next_cursor from the previous page; pass it back unchanged to get the next page"),
]
OutputMode = Annotated[
    str,
    Field(
        description="auto: inline below the size ceiling, else a JSONL file; inline: never a file "
        "(page cut to fit); file_ref: always a file; legacy: bare JSON array of matches",
        pattern="^(auto|inline|file_ref|legacy)$",
    ),
]
IncludeSnippet = Annotated[bool, Field(description="include each match's content; false sends spans only")]
StatsOnly = Annotated[
    bool,
    Field(description="no matches, just stats of the whole result list (counts per file and language, score range); next_cursor pages from the start"),
]
StatsFirst = Annotated[bool, Field(description="the stats block as well as the page")]


def register_search_tools(app: FastMCP, services: Services) -> None:
    s = services.settings.search
    PageSize = Annotated[int | None, Field(ge=1, le=s.max_page_size, description=f"matches per page (default {s.default_page_size}, max {s.max_page_size})")]
    SnippetLength = Annotated[int, Field(ge=1, le=s.max_snippet_length, description="cut each match's content to this many characters")]
    MaxTokens = Annotated[int | None, Field(ge=MIN_OUTPUT_TOKENS, description="cut the page to fit this many tokens; next_cursor continues losslessly")]
    JqFilter = Annotated[str | None, Field(description="jq expression over the full list of match objects, applied before paging, e.g. 'map(select(.file.path | test(\"tests/\") | not))'")]
    annotations = search_annotations()
    meta = search_meta(services.settings.offload.max_tokens)

    @app.tool(name="regex_search", description=REGEX_DESCRIPTION, annotations=annotations, meta=meta)
    @tool_errors
    async def regex_search(
        ctx: Context,
        pattern: Annotated[str | None, Field(description="ripgrep regex (or literal with fixed_string); omit when passing cursor")] = None,
        path: Annotated[str | None, Field(description="file or directory inside the server's roots")] = None,
        ignore_case: Annotated[bool, Field(description="match regardless of case")] = False,
        fixed_string: Annotated[bool, Field(description="pattern is a literal string, not a regex")] = False,
        whole_word: Annotated[bool, Field(description="match whole words only")] = False,
        multiline: Annotated[bool, Field(description="let a match span several lines")] = False,
        include_patterns: IncludeGlobs = None,
        exclude_patterns: ExcludeGlobs = None,
        context_lines: Annotated[int, Field(ge=0, le=MAX_CONTEXT_LINES, description="lines of context before and after each match")] = 0,
        include_snippet: IncludeSnippet = True,
        snippet_length: SnippetLength = s.default_snippet_length,
        page_size: PageSize = None,
        cursor: Cursor = None,
        output_mode: OutputMode = "auto",
        max_output_tokens: MaxTokens = None,
        stats_only: StatsOnly = False,
        stats_first: StatsFirst = False,
        jq_filter: JqFilter = None,
    ) -> ToolResult:
        request = _request(
            services, SearchMode.REGEX, pattern, path, cursor,
            include=include_patterns, exclude=exclude_patterns, ignore_case=ignore_case,
            fixed_string=fixed_string, whole_word=whole_word, multiline=multiline,
            context_lines=context_lines, max_results=s.max_results,
        )  # fmt: skip
        return await run_search(
            services, ctx, "regex_search", request, cursor, page_size, jq_filter,
            RecordOptions(include_snippet, snippet_length),
            OutputOptions(output_mode, max_output_tokens, stats_only, stats_first),
        )  # fmt: skip

    def make_ranked_tool(mode: SearchMode, name: str, description: str) -> None:
        @app.tool(name=name, description=description, annotations=annotations, meta=meta)
        @tool_errors
        async def ranked_search(
            ctx: Context,
            query: Annotated[str | None, Field(description="natural language or identifiers; omit when passing cursor")] = None,
            path: Annotated[str | None, Field(description="file or directory inside the server's roots")] = None,
            top_k: Annotated[int, Field(ge=1, le=s.max_results, description="how many ranked matches to return in all (paged like any result list)")] = 10,
            threshold: Annotated[float | None, Field(description="drop matches scoring below this")] = None,
            include_patterns: IncludeGlobs = None,
            exclude_patterns: ExcludeGlobs = None,
            include_snippet: IncludeSnippet = True,
            snippet_length: SnippetLength = s.default_snippet_length,
            page_size: PageSize = None,
            cursor: Cursor = None,
            output_mode: OutputMode = "auto",
            max_output_tokens: MaxTokens = None,
            stats_only: StatsOnly = False,
            stats_first: StatsFirst = False,
            jq_filter: JqFilter = None,
        ) -> ToolResult:
            request = _request(
                services, mode, query, path, cursor,
                include=include_patterns, exclude=exclude_patterns, top_k=top_k, threshold=threshold,
            )  # fmt: skip
            return await run_search(
                services, ctx, name, request, cursor, page_size, jq_filter,
                RecordOptions(include_snippet, snippet_length),
                OutputOptions(output_mode, max_output_tokens, stats_only, stats_first),
            )  # fmt: skip

    make_ranked_tool(SearchMode.SEMANTIC, "semantic_search", SEMANTIC_DESCRIPTION)
    make_ranked_tool(SearchMode.HYBRID, "hybrid_search", HYBRID_DESCRIPTION)


def _request(
    services: Services,
    mode: SearchMode,
    query: str | None,
    path: str | None,
    cursor: str | None,
    **fields: Any,
) -> SearchRequest | None:
    """Build the request the caller described, or None when it only sent a cursor.

    With a cursor *and* a query, the request is still built: the pager checks that it is the
    search the cursor belongs to (params mismatch -> -32602)."""
    if query is None:
        if cursor is None:
            raise InvalidParamsError(f"{'pattern' if mode is SearchMode.REGEX else 'query'} is required unless you pass a cursor")
        return None
    if not query.strip():
        raise InvalidParamsError("the pattern/query is empty; pass something to search for")
    location = resolve_search_path(path, services.roots)
    try:
        return SearchRequest(mode=mode, query=query, root=str(location.root), path=location.sub, **fields)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))} {e['msg']}" for e in exc.errors())
        raise InvalidParamsError(f"invalid search parameters: {problems}") from None


async def run_search(
    services: Services,
    ctx: Context,
    tool: str,
    request: SearchRequest | None,
    cursor: str | None,
    page_size: int | None,
    jq_filter: str | None,
    record_options: RecordOptions,
    output_options: OutputOptions,
) -> ToolResult:
    """Check the cursor, wait for the index if the page needs it, then page and render in one
    worker-thread hop: ripgrep and the index block, and a cached page is cheap enough that a
    second hop would be a measurable share of its latency."""
    pager = services.pager
    state = pager.decode(cursor, expected_request=request) if cursor is not None else None
    searched = pager.request_of(state) if state is not None else request
    assert searched is not None
    if f"{searched.mode.value}_search" != tool:
        # Authentic, but it pages another tool's search: answering would mislabel the results,
        # and refusing before paging spares restoring that search only to refuse it.
        raise InvalidParamsError(
            f"this cursor pages a {searched.mode.value}_search; pass it back to that tool, "
            f"or call {tool} without a cursor"
        )
    if searched.mode is not SearchMode.REGEX and (state is None or not await anyio.to_thread.run_sync(pager.is_live, state)):
        # A first page, or a cursor whose session is gone (restart, eviction): either searches
        # the index, so wait for it here, with progress, rather than block inside the search.
        await services.indexer.wait_ready(searched, ctx)

    def page_and_render() -> ToolResult:
        if state is not None:
            page = pager.page_at(state, page_size)
        else:
            assert request is not None
            # Regex results are not versioned by an index: search the files as they are now.
            fresh = request.mode is SearchMode.REGEX
            page = pager.first_page(request, page_size, view=jq_filter, reuse=not fresh)
        response = SearchResponse(page, record_options)
        return services.renderer.render(response, output_options, tool=tool, query=page.request.query)

    return await anyio.to_thread.run_sync(page_and_render)
