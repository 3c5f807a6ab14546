"""What the output layer renders: a page of a longer result list, behind a small protocol.

The layer must be able to shrink a page without losing anything, so it never slices records
itself: it asks the page for `cut(n)`, a page of the first n records whose next cursor starts
at the first omitted one. The search tools implement the protocol over a session `Page`;
`ListPage` implements it over an in-memory list (SQL results, proxied tool output).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol


class PageView(Protocol):
    """One page as a tool presents it to `OutputLayer.render`.

    `counts()` gives count, total_count, has_more and truncated (the source's own truncation,
    e.g. max_results reached); `stats_records()` iterates the *whole* result list, in the inline
    record shape, for the stats block; `metadata(extra_warnings)` must include the warnings.
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
            return {"count": self.written, "total_count": self.written, "has_more": False, "truncated": self.source_truncated}
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
