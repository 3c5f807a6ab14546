"""The search tools: `regex_search`, and `hybrid_search` (whose `mode="semantic"` ranks by
meaning alone).

Two tools, not one a mode: ripgrep's pattern and flags and the ranker's query, `top_k` and
`threshold` do not mix, and an agent picks a tool by its name. Two, not three: a semantic-only
tool was listed as a third (its schema the hybrid one's, ~2,000 characters of tools/list in every
conversation) for what one enum value says.

Each is a thin adapter: validate arguments -> `SearchRequest` -> `Pager` -> output layer ->
`ToolResult`. The two share every paging and presentation parameter; only the search-defining
ones differ, so the shared part is declared once (`server.tools.page_args`): each body takes
them as `**shared`, read as the call's `SharedArgs`, and `run_search` handles the rest.

With a cursor, the search is the cursor's: it is checked against this server's roots (the key
that sealed it may be shared by servers rooted elsewhere), and every search-defining argument
the caller also sent must equal the cursor's (never silently ignored). Presentation options
(page size, snippets, output mode, stats) may change from page to page.

No `from __future__ import annotations` here: the parameter types are built at registration
time from settings (page-size limits), and fastmcp must be able to evaluate them.
"""

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from fastmcp import Context, FastMCP
from fastmcp.tools.base import ToolResult
from pydantic import Field, ValidationError

from search_engine import (
    DEFAULT_TOP_K,
    MAX_CONTEXT_LINES,
    PathError,
    PathOutsideRootError,
    SearchMode,
    SearchRequest,
    resolve_search_path,
    searched_roots,
)
from server.clients import client_name, profile_for
from server.errors import InvalidParamsError
from server.jq import view_expression, view_key
from server.rendering import render_search
from server.response import SearchResponse
from server.services import Services
from server.tools.bounds import Globs, LongText, PathText
from server.tools.descriptions import (
    HYBRID_DESCRIPTION,
    READ_ONLY,
    REGEX_DESCRIPTION,
    paging,
    search_meta,
)
from server.tools.page_args import SharedArgs, shared_parameters, with_shared
from server.tools.registry import ToolBody, mcp_tool
from server.tools.schemas import SEARCH_OUTPUT
from server.tools.search_arguments import SearchArguments, sent_arguments
from server.validation_problems import validation_problems
from sessions import CursorParamsMismatchError, CursorState

# The search-defining parameters, each with the one line the listed schema carries (tools/list
# is paid for in every conversation, so one short line each).
#: Characters of each match's text a page shows when a call gives no `snippet_length`: whole
#: regex lines up to 500, and 6-8 lines of a semantic or hybrid chunk (enough to recognise the
#: code, and more files fit a token budget). Not settings (they were, and nobody set them): the
#: agent picks its own per call, up to `server.tools.page_args.MAX_SNIPPET_LENGTH`.
SNIPPET_LENGTH = 500
RANKED_SNIPPET_LENGTH = 300

PathArg = Annotated[PathText | None, Field(description="file or folder to search")]
IncludeGlobs = Annotated[Globs, Field(description="globs to search, e.g. *.py")]
ExcludeGlobs = Annotated[Globs, Field(description="globs to skip")]
#: The ranked modes `hybrid_search` takes, and what its `threshold` is compared with in each
#: (see `search_engine.ranking.search.Ranker.search`).
RankedMode = Literal["hybrid", "semantic"]
THRESHOLD = "min score: relative to the best (1.0); semantic: cosine (-1..1)"


#: Request fields named differently from the tool parameter that sets them.
_REQUEST_FIELD = {"pattern": "query", "include_patterns": "include", "exclude_patterns": "exclude"}


@dataclass(frozen=True, slots=True)
class SearchCall:
    """What a search tool was asked: its mode, its search-defining arguments by parameter name
    (the query under `pattern` or `query`, and `jq_filter`), and request fields the server fixes."""

    mode: SearchMode
    args: dict[str, Any]
    fixed: dict[str, Any] = field(default_factory=dict)

    @property
    def query_param(self) -> str:
        return "pattern" if self.mode is SearchMode.REGEX else "query"


def register_search_tools(app: FastMCP, services: Services) -> None:
    """Register the search tools, and the middleware that reads their arguments."""
    arguments = SearchArguments()
    app.add_middleware(arguments)
    s = services.settings.search
    contract = paging(services.settings.sessions.cursor_max_age_s)
    meta = search_meta(services.settings.offload.max_tokens)

    def search_tool(name: str, description: str, snippet_length: int) -> Callable[[ToolBody], ToolBody]:
        """Register the decorated body as search tool `name`, with the registration options and
        the shared parameters (their default `snippet_length` this tool's) the search tools share."""
        register = mcp_tool(
            app, name, description + contract.tool, annotations=READ_ONLY, output_schema=SEARCH_OUTPUT, meta=meta
        )
        shared = shared_parameters(
            snippet_length=snippet_length, max_page_size=services.pager.max_page_size, cursor=contract.cursor
        )

        def add(body: ToolBody) -> ToolBody:
            own = [
                p.name
                for p in inspect.signature(body).parameters.values()
                if p.name != "ctx" and p.kind is not p.VAR_KEYWORD
            ]
            arguments.add_tool(name, own, lambda p: _REQUEST_FIELD.get(p, p))
            return register(with_shared(shared)(body))

        return add

    @search_tool("regex_search", REGEX_DESCRIPTION, SNIPPET_LENGTH)
    async def regex_search(
        ctx: Context,
        pattern: Annotated[LongText | None, Field(description="regex (Rust syntax)")] = None,
        path: PathArg = None,
        ignore_case: Annotated[bool, Field(description="rg -i")] = False,
        fixed_string: Annotated[bool, Field(description="literal (rg -F)")] = False,
        whole_word: Annotated[bool, Field(description="rg -w")] = False,
        multiline: Annotated[bool, Field(description="rg -U")] = False,
        include_patterns: IncludeGlobs = None,
        exclude_patterns: ExcludeGlobs = None,
        context_lines: Annotated[int, Field(ge=0, le=MAX_CONTEXT_LINES, description="rg -C")] = 0,
        **shared: Any,
    ) -> ToolResult:
        shown = SharedArgs(**shared)
        call = SearchCall(SearchMode.REGEX, {
            "pattern": pattern, "path": path, "ignore_case": ignore_case, "fixed_string": fixed_string,
            "whole_word": whole_word, "multiline": multiline, "include_patterns": include_patterns,
            "exclude_patterns": exclude_patterns, "context_lines": context_lines, "jq_filter": shown.jq_filter,
        }, fixed={"max_results": s.max_results})  # fmt: skip
        return await run_search(services, ctx, "regex_search", call, shown)

    @search_tool("hybrid_search", HYBRID_DESCRIPTION, RANKED_SNIPPET_LENGTH)
    async def hybrid_search(
        ctx: Context,
        query: Annotated[LongText | None, Field(description="a name, words or a question")] = None,
        mode: Annotated[RankedMode, Field(description="semantic: by meaning alone")] = "hybrid",
        path: PathArg = None,
        top_k: Annotated[int, Field(ge=1, le=s.max_results, description="results wanted")] = DEFAULT_TOP_K,
        threshold: Annotated[float | None, Field(allow_inf_nan=False, description=THRESHOLD)] = None,
        include_patterns: IncludeGlobs = None,
        exclude_patterns: ExcludeGlobs = None,
        **shared: Any,
    ) -> ToolResult:
        shown = SharedArgs(**shared)
        call = SearchCall(SearchMode(mode), {
            "query": query, "mode": mode, "path": path, "top_k": top_k, "threshold": threshold,
            "include_patterns": include_patterns, "exclude_patterns": exclude_patterns, "jq_filter": shown.jq_filter,
        })  # fmt: skip
        return await run_search(services, ctx, "hybrid_search", call, shown)


def search_tool_for(mode: SearchMode) -> str:
    """The tool that runs searches of `mode`."""
    return "regex_search" if mode is SearchMode.REGEX else "hybrid_search"


def _request(services: Services, call: SearchCall) -> SearchRequest:
    """The request for a first page (no cursor): the query is required, `path` must lie inside
    the roots."""
    query = call.args[call.query_param]
    if query is None:
        raise InvalidParamsError(f"{call.query_param} is required unless you pass a cursor")
    if not query.strip():
        raise InvalidParamsError("the pattern/query is empty; pass something to search for")
    where = _searched(call.args["path"], services.roots)
    fields = {
        _REQUEST_FIELD.get(name, name): value
        for name, value in call.args.items()
        if name not in (call.query_param, "mode", "path", "jq_filter")
    }
    try:
        return SearchRequest(mode=call.mode, query=query, **where, **fields, **call.fixed)
    except ValidationError as exc:
        names: dict[str | int, str] = {field: argument for argument, field in _REQUEST_FIELD.items()}
        names["query"] = call.query_param
        problems = "; ".join(validation_problems(exc, shown=lambda _: False, names=names))  # values: the agent's own
        raise InvalidParamsError(f"invalid search parameters: {problems}") from None


def _searched(path: str | None, roots: list[Path]) -> dict[str, Any]:
    """Where a search runs, as request fields: the location `path` names inside the roots,
    or with no `path` every root (`searched_roots`; `roots` set when there are several)."""
    if path is None and len(roots) > 1:
        every = [str(root) for root in searched_roots(roots)]
        return {"root": every[0], "roots": tuple(every) if len(every) > 1 else ()}
    location = resolve_search_path(path, roots)
    return {"root": str(location.root), "path": location.sub}


def _check_cursor_root(searched: SearchRequest, roots: list[Path]) -> None:
    """Refuse a cursor whose search lies outside this server's roots, checked as a `path`
    argument would be (symlinks resolved), or that can no longer be resolved at all (deleted
    since): fail closed, never page what cannot be shown to lie inside. The messages name this
    server's roots, not the cursor's: a cursor is sealed, and a refusal must not read it out to
    whoever holds it."""
    try:
        for root in map(Path, searched.searched_roots):
            resolve_search_path(root / searched.path if searched.path else root, roots)
    except PathOutsideRootError:
        names = ", ".join(str(Path(r).resolve()) for r in roots)
        raise InvalidParamsError(
            f"this cursor's search is outside the allowed roots ({names}); it was issued by a server "
            "with other roots. Run the search again without a cursor, with a path inside them.",
            code="invalid_cursor",
        ) from None
    except PathError:
        raise InvalidParamsError(
            "the folder or file this cursor searches is gone or unreadable now; run the search again without a cursor.",
            code="invalid_cursor",
        ) from None


def _check_sent_arguments(services: Services, call: SearchCall, state: CursorState, searched: SearchRequest) -> None:
    """Every search-defining argument sent with the cursor must equal the cursor's search."""
    sent = sent_arguments()
    for name, value in call.args.items():
        if name not in sent:
            continue
        if name == "path":  # a path searches one root: never a cursor's search of several
            location = resolve_search_path(value, services.roots)
            same = (str(location.root), location.sub, ()) == (searched.root, searched.path, searched.roots)
        elif name == "jq_filter":
            same = state.view is not None and value == view_expression(state.view)
        elif name in ("include_patterns", "exclude_patterns"):
            same = tuple(value) == getattr(searched, _REQUEST_FIELD[name])
        else:
            same = value == getattr(searched, _REQUEST_FIELD.get(name, name))
        if not same:
            raise CursorParamsMismatchError(name)


async def run_search(services: Services, ctx: Context, tool: str, call: SearchCall, shown: SharedArgs) -> ToolResult:
    """Page and render in one worker-thread hop (ripgrep and the index block, and a cached page
    is cheap enough that a second hop would be a measurable share of its latency), once the
    index a first page searches is ready. A cursor is checked (`check_cursor`) and waited for
    (`wait_for_index`) by the pager, which alone knows whether its page re-runs the search."""
    pager = services.pager
    cursor, page_size, options = shown.cursor, shown.page_size, shown.page_options()
    request = _request(services, call) if cursor is None else None
    if request is not None and request.mode is not SearchMode.REGEX:
        # A first page searches the index: wait for it here, with progress, rather than block
        # inside the search.
        await services.indexer.wait_ready(request, ctx)

    client = profile_for(client_name(ctx), services.settings.offload)
    # The filter runs over the records this call shows; refused here, before any search, if it must be.
    view = view_key(call.args["jq_filter"], options.record_detail) if request is not None else None

    def check_cursor(state: CursorState, searched: SearchRequest) -> None:
        owner = search_tool_for(searched.mode)
        if owner != tool:
            # Authentic, but it pages another tool's search: answering would mislabel the results,
            # and refusing before paging spares restoring that search only to refuse it. (Which
            # ranked mode it pages is the cursor's, checked against `mode` only if sent.)
            raise InvalidParamsError(
                f"this cursor pages a {owner} search; pass it back to that tool, or call {tool} without a cursor",
                code="invalid_cursor",
            )
        _check_cursor_root(searched, services.roots)
        _check_sent_arguments(services, call, state, searched)

    def wait_for_index(searched: SearchRequest) -> None:
        """A cursor whose session is gone (restart, eviction) searches again: a ranked one waits
        for its index as a first page does (on the event loop, with progress)."""
        if searched.mode is not SearchMode.REGEX:
            anyio.from_thread.run(services.indexer.wait_ready, searched, ctx)

    def page_and_render() -> ToolResult:
        if cursor is not None:
            page = pager.resume(cursor, page_size, check=check_cursor, before_rerun=wait_for_index)
        else:
            assert request is not None
            # Regex results are not versioned by an index: search the files as they are now.
            fresh = request.mode is SearchMode.REGEX
            page = pager.first_page(request, page_size, view=view, reuse=not fresh)
        return render_search(services.layer, SearchResponse(page, options), tool=tool, client=client)

    return await anyio.to_thread.run_sync(page_and_render)
