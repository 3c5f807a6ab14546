"""The output layer: one page in, one response that fits out — inline, as a file, or as stats.

Rules, in the order they are applied (the mode decision is a pure function, `select_mode`, so
the whole matrix of mode x fits x max_output_tokens is tested without building responses):
- `stats_only`: aggregate stats instead of records, always inline; `pagination.next_cursor`
  starts at this page's first record so the agent can still page through it.
- `legacy`: the bare JSON array of records as text, no wrapper and no structured content.
- `auto`: inline when the whole response fits the ceiling (tokens and bytes), else file_ref.
  `inline` never offloads; `file_ref` always does. The file_ref response fits the ceiling too:
  its descriptor lists as many of the records' fields as fit (`descriptor`). An offloaded
  search page also names the whole list it is cut from as its dataset (`list_dataset`), so
  SQL and jq over it see every match, not this page's.
- A response over the ceiling in inline mode (or over `max_output_tokens`) is cut to the
  largest prefix of the page that fits, found by binary search over `page.cut(n)` with the
  whole response measured each time; the cut is lossless because the cut page's cursor resumes
  at the first omitted record. If not even one record fits, that record's largest strings are
  cut and marked (never a zero-record page, whose cursor would point at the same record
  forever).
- A failed offload (disk full, permission denied, no such directory) never fails the call: the
  page is answered inline, cut to the ceiling, and a warning says why.
- The ceiling is the layer's default (`offload.max_tokens` / `MAX_ANSWER_BYTES`) unless the caller
  passes its client's (`Layout.ceiling`, see `server.clients`); `max_output_tokens`
  only ever lowers it. Both the structured JSON and the text block must fit it, the text block
  also its line limit.
The layer never slices records itself: it asks the page (`PageView`) for `cut(n)`, a page of
the first n records whose next cursor starts at the first omitted one. The search tools
implement it over a session `Page`, `ListPage` over an in-memory list (SQL rows, proxy pages).
The text block is the same JSON as the structured content unless the caller renders it itself
(`Layout.text`: the search tools' grep-like text). `legacy` answers a bare array as text
and the inline page (which carries the same records) as structured content.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Protocol

from server.errors import StoreWriteError
from server.output.descriptor import FileRef, build_file_ref
from server.output.fit import last_fitting, shrink_to_fit
from server.output.jsontext import MAX_ANSWER_BYTES, byte_size, dumps, estimate_tokens
from server.output.list_dataset import ListDataset, ListDatasets, WholeList
from server.output.offload import OffloadedFile, OffloadStore
from server.output.rows import MAX_RESULT_BYTES
from server.output.stats import Stats, compute_stats
from server.records import Detail
from server.settings import OffloadSettings, SqlSettings

#: Below this even an empty page's envelope (search, pagination, metadata) may not fit, so a
#: smaller `max_output_tokens` is refused up front instead of producing a useless answer.
MIN_OUTPUT_TOKENS = 256


class OutputMode(str, Enum):
    """How a page reaches the agent (see the module doc); LEGACY is for clients written before
    structured output."""

    AUTO = "auto"
    INLINE = "inline"
    FILE_REF = "file_ref"
    LEGACY = "legacy"


@dataclass(frozen=True, slots=True)
class Ceiling:
    """The largest response we answer inline: an estimated-token and a byte limit, and for
    clients that cut tool output by lines (Codex CLI: 256), a line limit on the text block."""

    tokens: int
    bytes: int
    lines: int | None = None

    def fits(self, text: str) -> bool:
        return estimate_tokens(text) <= self.tokens and byte_size(text) <= self.bytes

    def fits_text(self, text: str) -> bool:
        """`fits`, and within the line limit (counted as a client splitting on newlines would)."""
        return self.fits(text) and (self.lines is None or text.count("\n") + 1 <= self.lines)

    def lowered_to(self, max_output_tokens: int | None) -> Ceiling:
        """This ceiling, or a tighter one when the caller asked for small answers."""
        if max_output_tokens is None or max_output_tokens >= self.tokens:
            return self
        return Ceiling(tokens=max_output_tokens, bytes=self.bytes, lines=self.lines)


def select_mode(requested: OutputMode, *, fits: bool, wants_small: bool) -> OutputMode:
    """The mode a page is rendered in. In AUTO a page over the ceiling goes to a file, unless
    the caller set `max_output_tokens` (`wants_small`): it asked for a short inline answer, so
    the page is cut to fit instead."""
    if requested is not OutputMode.AUTO:
        return requested
    if fits or wants_small:
        return OutputMode.INLINE
    return OutputMode.FILE_REF


class PageView(Protocol):
    """One page as a tool presents it to `OutputLayer.render`.

    `counts()` gives count, total_count, has_more and truncated (the source's own truncation,
    e.g. max_results reached); `stats_records()` iterates the *whole* result list, in the inline
    record shape, for the stats block; `metadata(extra_warnings)` must include the warnings.
    `whole_list()` is the list the page is cut from, when an offloaded page should name it as
    its dataset (`list_dataset`), else None.
    """

    @property
    def next_cursor(self) -> str | None: ...

    def records(self) -> list[dict[str, Any]]: ...

    def cut(self, n: int) -> PageView: ...

    def search(self) -> dict[str, Any]: ...

    def pagination(self) -> dict[str, Any]: ...

    def counts(self) -> dict[str, Any]: ...

    def metadata(self, extra_warnings: list[str] | None = None) -> dict[str, Any]: ...

    def stats_records(self) -> Iterable[Any]: ...

    def whole_list(self) -> WholeList | None: ...


@dataclass(frozen=True)
class ListPage:
    """A page over a list held in memory.

    `cursor_for(offset)` mints the cursor that resumes at `offset`; without it a cut page has
    no cursor and the layer's warning says so (e.g. SQL results: re-query with OFFSET).
    `written` is set for a whole result already written to a file and too large to hold: the
    page counts that many records, of which `items` are the first (the descriptor's sample).
    """

    items: Sequence[Any]
    offset: int = 0
    page_size: int | None = None
    limit: int | None = None
    search_block: dict[str, Any] = field(default_factory=dict)
    metadata_block: dict[str, Any] = field(default_factory=dict)
    cursor_for: Callable[[int], str | None] | None = None
    source_truncated: bool = False
    written: int | None = None

    @property
    def _end(self) -> int:
        size = self.page_size if self.page_size is not None else len(self.items)
        if self.limit is not None:
            size = min(size, self.limit)
        return min(len(self.items), self.offset + size)

    @property
    def next_cursor(self) -> str | None:
        if self._end >= len(self.items) or self.cursor_for is None:
            return None
        return self.cursor_for(self._end)

    def records(self) -> list[Any]:
        return list(self.items[self.offset : self._end])

    def cut(self, n: int) -> ListPage:
        if n < 0:
            raise ValueError(f"cannot cut a page to {n} records")
        return replace(self, limit=n if self.limit is None else min(n, self.limit))

    def search(self) -> dict[str, Any]:
        return dict(self.search_block)

    def pagination(self) -> dict[str, Any]:
        size = self.page_size or max(len(self.items), 1)
        return {
            "next_cursor": self.next_cursor,
            "page_size": size,
            "current_page": self.offset // size + 1,
            "total_pages": max(1, math.ceil(len(self.items) / size)),
            "offset": self.offset,
        }

    def counts(self) -> dict[str, Any]:
        if self.written is not None:
            return {
                "count": self.written,
                "total_count": self.written,
                "has_more": False,
                "truncated": self.source_truncated,
            }
        return {
            "count": self._end - self.offset,
            "total_count": len(self.items),
            "has_more": self._end < len(self.items),
            "truncated": self.source_truncated,
        }

    def metadata(self, extra_warnings: list[str] | None = None) -> dict[str, Any]:
        warnings = [*self.metadata_block.get("warnings", []), *(extra_warnings or [])]
        return {**self.metadata_block, "warnings": warnings}

    def stats_records(self) -> Iterable[Any]:
        return self.items

    def whole_list(self) -> None:
        """None: these pages (SQL rows, proxied records) name their own file as the dataset."""
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class PageOptions:
    """A page's options, as the agent chose them: built once per call by the tool, from arguments
    its input schema has already validated (`output_mode` one of the modes, `max_output_tokens`
    at least MIN_OUTPUT_TOKENS), so nothing here checks them again. Built by keyword: two of the
    flags are booleans side by side, which a positional call could swap unseen. The layer reads
    `output_mode`, `max_output_tokens` and the stats; `snippet_length` and `detail` shape a
    search page's match records (`server.response.SearchResponse`), and other pages' records are
    what their tool made them."""

    #: Characters of each match's text; None: whole texts, 0: none (locations only).
    snippet_length: int | None = None
    output_mode: OutputMode = OutputMode.AUTO
    max_output_tokens: int | None = None
    stats_only: bool = False
    stats_first: bool = False
    detail: Detail = Detail.COMPACT

    @property
    def record_detail(self) -> Detail:
        """The detail match records are printed at: `legacy` prints the seed-compatible (full)
        records whatever `detail` says, since it exists for clients written against that shape."""
        return Detail.FULL if self.output_mode is OutputMode.LEGACY else self.detail


@dataclass(frozen=True)
class Layout:
    """How one tool lays out its answers, whatever the agent chose: `tool` and `query` name the
    offloaded file's header, the rest says how an inline page shows its records and for whom."""

    tool: str
    query: str
    records_key: str = "matches"
    #: How an inline page shows its records (e.g. grouped by file); None: as a list.
    present: Callable[[list[Any]], Any] | None = None
    #: The text block of a finished response; None: the response's JSON.
    text: Callable[[dict[str, Any]], str] | None = None
    #: The client's ceiling, when known; None: the layer's default.
    ceiling: Ceiling | None = None
    #: Top-level record fields a last-resort shrink never cuts (what identifies the record).
    uncut: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Rendered:
    """A finished response. `text` is the text block (in legacy mode the bare array); `file_ref`
    is set when the page went to a file, for the resource link."""

    structured: dict[str, Any]
    text: str
    mode: str
    file_ref: FileRef | None
    warnings: tuple[str, ...]


class OutputLayer:
    """Renders pages for the search tools, the SQL tool and the proxy alike."""

    def __init__(
        self,
        settings: OffloadSettings,
        sql: SqlSettings,
        store: OffloadStore,
        *,
        sql_tool: str | None = "analyze-with-duckdb",
    ) -> None:
        """`sql`: the caps of a whole SQL result, which the whole result list a page names as
        its dataset is held to as well."""
        self.ceiling = Ceiling(tokens=settings.max_tokens, bytes=MAX_ANSWER_BYTES)
        self.retention_hours = settings.retention_hours
        self.store = store
        self.sql_tool = sql_tool
        self.lists = ListDatasets(store, max_rows=sql.max_rows, max_bytes=MAX_RESULT_BYTES)

    def render(self, page: PageView, options: PageOptions, layout: Layout) -> Rendered:
        ceiling = (layout.ceiling or self.ceiling).lowered_to(options.max_output_tokens)
        stats = None
        if options.stats_only or options.stats_first:
            stats = compute_stats(page.stats_records(), total_count=page.counts()["total_count"])
        if options.stats_only:
            return self._stats_only(page, stats, layout)
        if options.output_mode is OutputMode.LEGACY:
            records = page.records()
            response = self._inline(page, records, None, layout, [], cut=False)
            return Rendered(response, dumps(records), OutputMode.LEGACY.value, None, ())

        records = page.records()
        if options.output_mode is not OutputMode.FILE_REF:
            response = self._inline(page, records, stats, layout, [], cut=False)
            fits, text = self._fits(response, layout, ceiling)
            mode = select_mode(options.output_mode, fits=fits, wants_small=options.max_output_tokens is not None)
            if mode is OutputMode.INLINE:
                if fits:
                    return Rendered(response, text, mode.value, None, ())
                return self._cut_to_fit(page, stats, layout, ceiling, why=self._cut_reason(options, ceiling))
        try:
            offloaded = self.store.write(
                tool=layout.tool,
                query=layout.query,
                records=records,
                page=page.pagination().get("current_page"),
                next_cursor=page.next_cursor,
            )
        except StoreWriteError as exc:
            return self._cut_to_fit(page, stats, layout, ceiling, why=f"the page could not be offloaded ({exc})")
        whole = page.whole_list()
        dataset = None
        if whole is not None:
            dataset = self.lists.save(whole, offloaded, len(records), tool=layout.tool, query=layout.query)
        return self._file_ref(page, records, offloaded, stats, layout, ceiling, dataset)

    def render_written(
        self, page: PageView, offloaded: OffloadedFile, options: PageOptions, layout: Layout
    ) -> Rendered:
        """The file_ref answer for records the caller already wrote to `offloaded` (a result
        too large to hold, streamed to the file): `page` gives the counts and blocks of the
        whole file, and its `records()` are the sample the descriptor is built from."""
        ceiling = (layout.ceiling or self.ceiling).lowered_to(options.max_output_tokens)
        return self._file_ref(page, page.records(), offloaded, None, layout, ceiling)

    def _file_ref(
        self,
        page: PageView,
        records: list[Any],
        offloaded: OffloadedFile,
        stats: Stats | None,
        layout: Layout,
        ceiling: Ceiling,
        dataset: ListDataset | None = None,
    ) -> Rendered:
        counts = page.counts()

        def respond(ref: FileRef) -> dict[str, Any]:
            results: dict[str, Any] = {"mode": "file_ref"}
            if stats is not None:
                results["stats"] = stats.to_dict()
            results.update({"file_ref": ref.to_dict(), **counts})
            return self._envelope(page, results, [])

        file_ref = build_file_ref(
            offloaded,
            records,
            has_more=counts["has_more"],
            retention_hours=self.retention_hours,
            sql_tool=self.sql_tool,
            fits=lambda ref: self._fits(respond(ref), layout, ceiling)[0],
            dataset=dataset,
        )
        response = respond(file_ref)
        return Rendered(response, self._text(response, layout), OutputMode.FILE_REF.value, file_ref, ())

    # -- building responses ----------------------------------------------------------------------

    @staticmethod
    def _text(response: dict[str, Any], layout: Layout) -> str:
        return layout.text(response) if layout.text is not None else dumps(response)

    def _fits(self, response: dict[str, Any], layout: Layout, ceiling: Ceiling) -> tuple[bool, str]:
        """Whether both blocks of `response` fit `ceiling`, and the text block."""
        structured = dumps(response)
        if layout.text is None:
            return ceiling.fits_text(structured), structured
        text = layout.text(response)
        return ceiling.fits(structured) and ceiling.fits_text(text), text

    @staticmethod
    def _envelope(page: PageView, results: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
        return {
            "search": page.search(),
            "results": results,
            "pagination": page.pagination(),
            "metadata": page.metadata(warnings),
        }

    def _inline(
        self,
        page: PageView,
        records: list[Any],
        stats: Stats | None,
        layout: Layout,
        warnings: list[str],
        *,
        cut: bool,
    ) -> dict[str, Any]:
        counts = page.counts()
        results: dict[str, Any] = {"mode": "inline"}
        if stats is not None:
            results["stats"] = stats.to_dict()
        results[layout.records_key] = layout.present(records) if layout.present is not None else records
        results.update(counts)
        results["count"] = len(records)
        results["truncated"] = bool(counts.get("truncated")) or cut
        return self._envelope(page, results, warnings)

    def _stats_only(self, page: PageView, stats: Stats | None, layout: Layout) -> Rendered:
        """Stats instead of records; the cursor resumes at this page's first record."""
        empty = page.cut(0)
        results = {"mode": "stats_only", "stats": stats.to_dict() if stats else None, **empty.counts()}
        response = self._envelope(empty, results, [])
        return Rendered(response, self._text(response, layout), "stats_only", None, ())

    # -- cutting -----------------------------------------------------------------------------------

    @staticmethod
    def _cut_reason(options: PageOptions, ceiling: Ceiling) -> str:
        if options.max_output_tokens is not None and options.max_output_tokens <= ceiling.tokens:
            return f"max_output_tokens={options.max_output_tokens}"
        over = f"{ceiling.tokens} tokens / {ceiling.bytes} bytes"
        return f"output_mode={options.output_mode.value} and the page is over {over}"

    @staticmethod
    def _cut_warning(kept: int, total: int, next_cursor: str | None, why: str) -> str:
        resume = (
            "pagination.next_cursor continues at the first omitted result"
            if next_cursor is not None
            else "no cursor is available for the omitted results; narrow the query to see them"
        )
        return f"page cut to {kept} of {total} results to fit ({why}); {resume}"

    def _cut_to_fit(
        self, page: PageView, stats: Stats | None, layout: Layout, ceiling: Ceiling, *, why: str
    ) -> Rendered:
        """The largest lossless prefix of `page` whose whole response fits `ceiling`."""
        total = page.counts()["count"]

        def build(n: int) -> tuple[dict[str, Any], tuple[bool, str], list[str]]:
            candidate = page.cut(n)
            warnings = [self._cut_warning(n, total, candidate.next_cursor, why)]
            response = self._inline(candidate, candidate.records(), stats, layout, warnings, cut=True)
            return response, self._fits(response, layout, ceiling), warnings

        best = last_fitting(build, 1, total - 1, lambda built: built[1][0])
        if best is None:
            return self._shrink_single(page, stats, layout, ceiling, total, why)
        response, (_, text), warnings = best
        return Rendered(response, text, OutputMode.INLINE.value, None, tuple(warnings))

    def _shrink_single(
        self, page: PageView, stats: Stats | None, layout: Layout, ceiling: Ceiling, total: int, why: str
    ) -> Rendered:
        """Not even one record fits: keep one record, with its largest strings cut and marked
        (and, when that is not enough, its widest objects cut to their first members)."""
        single = page.cut(min(1, total))
        records = single.records()
        warnings = [self._cut_warning(len(records), total, single.next_cursor, why)]
        if records:
            warnings.append(
                "the first result alone is over the limit, so its longest fields were cut (marked "
                "'…[cut N chars …]', '…[cut N members …]'); call again with output_mode=file_ref to get it in full"
            )
            # The envelope without the record; the record alone is measured as a list item, which
            # costs at least what any `present`ation of it does.
            probe = dumps(self._inline(single, [], stats, layout, warnings, cut=True))
            record, _ = shrink_to_fit(
                records[0],
                ceiling.tokens - estimate_tokens(probe),
                ceiling.bytes - byte_size(probe),
                uncut=layout.uncut,
                objects=True,
            )
            records = [record]
        response = self._inline(single, records, stats, layout, warnings, cut=True)
        fits, text = self._fits(response, layout, ceiling)
        if not fits:
            warnings.append(f"the response is still over the limit ({why}): the envelope alone is too large")
            response = self._inline(single, records, stats, layout, warnings, cut=True)
            text = self._text(response, layout)
        return Rendered(response, text, OutputMode.INLINE.value, None, tuple(warnings))
