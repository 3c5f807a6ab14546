"""The response envelope of a search tool, built from one `Page`.

`{"search", "results", "pagination", "metadata"}` is the shape agents learn once; every search
tool, every output mode and the offloaded file's header derive from `SearchResponse`, so a field
means the same thing everywhere. `SearchResponse.cut(n)` is what makes the output layer's size
cuts lossless: it delegates to `Page.cut`, whose next cursor resumes at the first omitted match.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from search_engine import Match, SearchRequest
from server.jq import view_expression
from server.output import PageOptions, WholeList
from server.records import Detail, match_record
from sessions import Page

#: Request fields that are shown as the search's identity rather than under "parameters".
_IDENTITY_FIELDS = {"query", "mode", "root"}


def search_block(request: SearchRequest, view: str | None, detail: Detail) -> dict[str, Any]:
    # Defaults left out: the agent sent them or can read them in the tool schema, and every
    # page repeats this block (compact pages leave out an empty `parameters` too).
    params = {
        k: v for k, v in request.model_dump(mode="json", exclude_defaults=True).items() if k not in _IDENTITY_FIELDS
    }
    if view:
        params["jq_filter"] = _echo(view_expression(view))
    block: dict[str, Any] = {"query": _echo(request.query), "mode": request.mode.value}
    if params or detail is Detail.FULL:
        block["parameters"] = params
    return block


#: Longest query or filter text echoed back. The agent wrote it, and a 100 KB pattern repeated
#: on every page would push even a one-match page over the size ceiling.
_ECHO_CHARS = 300


def _echo(text: str) -> str:
    return text if len(text) <= _ECHO_CHARS else f"{text[:_ECHO_CHARS]}… ({len(text)} characters)"


@dataclass
class SearchResponse:
    """One page ready to be rendered: the page, the options the agent chose for it (its matches
    are printed at `options.record_detail`), and extra warnings."""

    page: Page
    options: PageOptions
    warnings: list[str] = field(default_factory=list)

    def records(self) -> list[dict[str, Any]]:
        return [
            match_record(
                m,
                detail=self.options.record_detail,
                snippet_length=self.options.snippet_length,
            )
            for m in self.page.matches
        ]

    def stats_records(self) -> Iterator[dict[str, Any]]:
        """Every match of the search (not just this page), for stats_only / stats_first."""
        return (match_record(m, snippet_length=0) for m in self._list())

    def whole_list(self) -> WholeList:
        """The list this page is cut from, shown as the page shows its matches: an offloaded
        page names it as its dataset. One session's list never changes, so the session and
        the record options identify the file written for it."""
        o, detail = self.options, self.options.record_detail
        matches = self._list()

        def records() -> Iterator[dict[str, Any]]:
            for m in matches:
                yield match_record(m, detail=detail, snippet_length=o.snippet_length)

        key = f"{self.page.session_id}:{detail.value}:{o.snippet_length}"
        return WholeList(key, len(matches), records)

    def _list(self) -> Sequence[Match]:
        return self.page.result.matches if self.page.result is not None else self.page.matches

    def cut(self, n: int) -> SearchResponse:
        return replace(self, page=self.page.cut(n))

    @property
    def next_cursor(self) -> str | None:
        return self.page.next_cursor

    @property
    def compact(self) -> bool:
        return self.options.record_detail is Detail.COMPACT

    def search(self) -> dict[str, Any]:
        return search_block(self.page.request, self.page.view, self.options.record_detail)

    def pagination(self) -> dict[str, Any]:
        p = self.page
        return {
            "next_cursor": p.next_cursor,
            "page_size": p.page_size,
            "current_page": p.current_page,
            "total_pages": p.total_pages,
            "offset": p.offset,
        }

    def counts(self) -> dict[str, Any]:
        """Compact pages carry `search_total_count` only when it says something new (a
        jq_filter narrowed the list, or max_results cut it)."""
        p = self.page
        counts: dict[str, Any] = {"count": len(p.matches), "total_count": p.total_count}
        if not self.compact or p.search_total_count != p.total_count:
            counts["search_total_count"] = p.search_total_count
        counts.update(has_more=p.has_more, truncated=p.truncated)
        result = p.result  # scores are relative (hybrid's best is 1.0): this is what says "nothing close"
        if result is not None and result.best_similarity is not None:
            counts["best_similarity"] = result.best_similarity
            if result.low_relevance:
                counts["low_relevance"] = True
        return counts

    def metadata(self, extra_warnings: list[str] | None = None) -> dict[str, Any]:
        """Compact pages keep what an agent acts on: where the list came from (`cache`), the
        page's time, and warnings when there are any."""
        p = self.page
        warnings = [*p.warnings, *self._cut_warning(), *self.warnings, *(extra_warnings or [])]
        if self.compact:
            compact: dict[str, Any] = {"cache": p.cache, "time_ms": round(p.page_time_ms, 1)}
            compact["freshness"] = self.freshness()
            if warnings:
                compact["warnings"] = warnings
            return compact
        return {
            "search_time_ms": round(p.search_time_ms, 3),
            "index_time_ms": round(p.index_time_ms, 3),
            "page_time_ms": round(p.page_time_ms, 3),
            "cache": p.cache,
            "index": {"generation": p.index_generation},
            "freshness": self.freshness(),
            "warnings": warnings,
        }

    def freshness(self) -> dict[str, Any]:
        """What state of the files this page's results reflect (docs/tools.md, "Freshness"):
        `state` and `as_of` always; what was left out while `updating`, since when results
        are `unverified`, and on a page served from a cursor when its lines were re-checked
        against the files and how many results are marked `changed`."""
        p = self.page
        f = p.freshness
        block: dict[str, Any] = {"state": f.state if f else "current", "as_of": round(f.as_of, 3) if f else None}
        if f is not None and f.state == "updating":
            block.update(pending_count=f.pending_count, pending=list(f.pending))
        if f is not None and f.state == "unverified":
            block["verified_at"] = round(f.verified_at, 3) if f.verified_at else None
        if f is not None and f.reason and (f.state != "current" or not self.compact):
            block["reason"] = f.reason
        if f is not None and not self.compact:
            block["detection"] = f.detection
        if p.rechecked_at is not None:
            block["rechecked_at"] = round(p.rechecked_at, 3)
            block["changed_count"] = sum(1 for m in p.matches if m.changed is not None)
        return block

    def _cut_warning(self) -> list[str]:
        """The search found more than it keeps (search.max_results): say so on every page, with
        the true total, since paging to the end will never reach the rest."""
        p = self.page
        if not p.truncated:
            return []
        return [
            f"the search found {p.search_total_count:,} matches and keeps the first {p.request.max_results:,} "
            "(search.max_results); narrow it with path, include_patterns or a more specific pattern to reach the rest"
        ]
