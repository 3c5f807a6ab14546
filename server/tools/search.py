"""The search tools: `regex_search`, `semantic_search`, `hybrid_search`.

Each is a thin adapter: validate arguments -> `SearchRequest` -> `Pager` -> output layer ->
`ToolResult`. The three share every paging and presentation parameter; only the search-defining
ones differ, so the shared part is declared once as annotated types and handled by
`run_search`.

No `from __future__ import annotations` here: the parameter types are built at registration
time from settings (page-size limits), and fastmcp must be able to evaluate them.
"""


from typing import Annotated, Any, Literal

import anyio
from fastmcp import Context, FastMCP
from fastmcp.tools.base import ToolResult
from pydantic import Field, ValidationError

from search_engine.models import MAX_CONTEXT_LINES, SearchMode, SearchRequest
from search_engine.paths import resolve_search_path
from server.clients import client_name, profile_for
from server.output import MIN_OUTPUT_TOKENS
from server.errors import InvalidParamsError, tool_errors
from server.records import Detail
from server.rendering import OutputOptions
from server.response import RecordOptions, SearchResponse
from server.services import Services
from server.tools.descriptions import (
    HYBRID_DESCRIPTION,
    REGEX_DESCRIPTION,
    SEMANTIC_DESCRIPTION,
    paging,
    search_annotations,
    search_meta,
)
from server.tools.schemas import SEARCH_OUTPUT

# Parameter descriptions are short and only where the name and type do not say it all: the
# three search tools repeat them, and tools/list is paid for in every conversation.
IncludeGlobs = list[str] | None
ExcludeGlobs = list[str] | None
Cursor = str | None
OutputMode = Annotated[
    Literal["auto", "inline", "file_ref", "legacy"],
    Field(description="auto: a file when over the size limit; inline: cut instead; legacy: bare JSON array"),
]
StatsOnly = Annotated[bool, Field(description="counts per file instead of matches")]
StatsFirst = Annotated[bool, Field(description="counts as well as matches")]
DetailLevel = Annotated[Literal["compact", "full"], Field(description="full: byte spans, language, ranks")]


def register_search_tools(app: FastMCP, services: Services) -> None:
    s = services.settings.search
    PageSize = Annotated[int | None, Field(ge=1, le=s.max_page_size)]
    SnippetLength = Annotated[int, Field(ge=1, le=s.max_snippet_length, description="cut each text to this many chars")]
    MaxTokens = Annotated[int | None, Field(ge=MIN_OUTPUT_TOKENS, description="cut the page to this size")]
    JqFilter = Annotated[str | None, Field(description="jq over the list of full match objects, before paging")]
    annotations = search_annotations()
    meta = search_meta(services.settings.offload.max_tokens)
    contract = paging(services.settings.sessions.cursor_max_age_s)
    tool = {"annotations": annotations, "meta": meta, "output_schema": SEARCH_OUTPUT}

    @app.tool(name="regex_search", description=REGEX_DESCRIPTION + contract, **tool)
    @tool_errors
    async def regex_search(
        ctx: Context,
        pattern: str | None = None,
        path: str | None = None,
        ignore_case: bool = False,
        fixed_string: bool = False,
        whole_word: bool = False,
        multiline: bool = False,
        include_patterns: IncludeGlobs = None,
        exclude_patterns: ExcludeGlobs = None,
        context_lines: Annotated[int, Field(ge=0, le=MAX_CONTEXT_LINES)] = 0,
        include_snippet: bool = True,
        snippet_length: SnippetLength = s.default_snippet_length,
        page_size: PageSize = None,
        cursor: Cursor = None,
        output_mode: OutputMode = "auto",
        max_output_tokens: MaxTokens = None,
        stats_only: StatsOnly = False,
        stats_first: StatsFirst = False,
        jq_filter: JqFilter = None,
        detail: DetailLevel = "compact",
    ) -> ToolResult:
        request = _request(
            services, SearchMode.REGEX, pattern, path, cursor,
            include=include_patterns, exclude=exclude_patterns, ignore_case=ignore_case,
            fixed_string=fixed_string, whole_word=whole_word, multiline=multiline,
            context_lines=context_lines, max_results=s.max_results,
        )  # fmt: skip
        return await run_search(
            services, ctx, "regex_search", request, cursor, page_size, jq_filter,
            _record_options(include_snippet, snippet_length, detail, output_mode),
            OutputOptions(output_mode, max_output_tokens, stats_only, stats_first),
        )  # fmt: skip

    def make_ranked_tool(mode: SearchMode, name: str, description: str) -> None:
        @app.tool(name=name, description=description + contract, **tool)
        @tool_errors
        async def ranked_search(
            ctx: Context,
            query: str | None = None,
            path: str | None = None,
            top_k: Annotated[int, Field(ge=1, le=s.max_results)] = 10,
            threshold: float | None = None,
            include_patterns: IncludeGlobs = None,
            exclude_patterns: ExcludeGlobs = None,
            include_snippet: bool = True,
            snippet_length: SnippetLength = s.default_ranked_snippet_length,
            page_size: PageSize = None,
            cursor: Cursor = None,
            output_mode: OutputMode = "auto",
            max_output_tokens: MaxTokens = None,
            stats_only: StatsOnly = False,
            stats_first: StatsFirst = False,
            jq_filter: JqFilter = None,
            detail: DetailLevel = "compact",
        ) -> ToolResult:
            request = _request(
                services, mode, query, path, cursor,
                include=include_patterns, exclude=exclude_patterns, top_k=top_k, threshold=threshold,
            )  # fmt: skip
            return await run_search(
                services, ctx, name, request, cursor, page_size, jq_filter,
                _record_options(include_snippet, snippet_length, detail, output_mode),
                OutputOptions(output_mode, max_output_tokens, stats_only, stats_first),
            )  # fmt: skip

    make_ranked_tool(SearchMode.SEMANTIC, "semantic_search", SEMANTIC_DESCRIPTION)
    make_ranked_tool(SearchMode.HYBRID, "hybrid_search", HYBRID_DESCRIPTION)


def _record_options(include_snippet: bool, snippet_length: int, detail: str, output_mode: str) -> RecordOptions:
    """`legacy` prints the seed-compatible records whatever `detail` says: it exists for
    clients written against that shape."""
    level = Detail.FULL if output_mode == "legacy" else Detail(detail)
    return RecordOptions(include_snippet, snippet_length, level)


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

    client = profile_for(client_name(ctx), services.settings.offload)

    def page_and_render() -> ToolResult:
        if state is not None:
            page = pager.page_at(state, page_size)
        else:
            assert request is not None
            # Regex results are not versioned by an index: search the files as they are now.
            fresh = request.mode is SearchMode.REGEX
            page = pager.first_page(request, page_size, view=jq_filter, reuse=not fresh)
        response = SearchResponse(page, record_options)
        return services.renderer.render_search(response, output_options, tool=tool, client=client)

    return await anyio.to_thread.run_sync(page_and_render)
