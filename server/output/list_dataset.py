"""The dataset a search's file_ref answer names: the search's whole result list, not the page.

An offloaded page holds at most `MAX_PAGE_SIZE` matches, but an agent sent to SQL or
jq "to query a big result (group, count, join)" means the result, all of it: the matches of
`django/http/` on page 1 of 8,752 are not the matches of `django/http/`. So beside the page
file, the list the pages walk (every match the session holds, after any jq_filter) is written
once as a dataset of its own, in the page's record shape, and the descriptor names it
(`ListDataset.to_dict`, `results.file_ref.dataset`). The page file stays as it was: its lines
are what the page shows, and its header carries the cursor.

The list is written as its records are made (`WholeList.records`), spooled to disk by
`OffloadStore.write_lines`, never held as a second copy, and cut at the caps a whole SQL result
has (`sql.max_rows`, `MAX_RESULT_BYTES`), the descriptor then saying
how many matches were left out and why. Each later page of the same list, shown the same way,
names the same file (`ListDatasets` remembers the last ones written) until it expires.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from server.errors import DatasetNotFoundError, StoreWriteError
from server.output.files import dataset_view
from server.output.offload import OffloadedFile, OffloadStore
from server.output.rows import BoundedRows, Row

#: Lists remembered for later pages: a page of a forgotten one writes its list again.
_REMEMBERED = 64


@dataclass(frozen=True, slots=True)
class WholeList:
    """Every record of the list a page is cut from, at the page's detail: `key` is the same
    only for the same list shown the same way (so its pages share one file), `count` is its
    length, and `records()` makes its records one at a time."""

    key: str
    count: int
    records: Callable[[], Iterator[Any]]


@dataclass(frozen=True, slots=True)
class ListDataset:
    """The dataset an answer names and how it relates to the list: `rows` of the list's
    `total_count` records are in `file` (the first ones); `why` says why the rest are not
    (None when none is left out)."""

    file: OffloadedFile
    rows: int
    total_count: int
    why: str | None = None

    @property
    def left_out(self) -> int:
        return self.total_count - self.rows

    def note(self, *, is_page: bool) -> str:
        if self.left_out and is_page:  # the list could not be written: the page is all there is
            return f"only this page's {self.rows:,} of the {self.total_count:,} matches (total_count): {self.why}"
        if self.left_out:
            return (
                f"the first {self.rows:,} of the {self.total_count:,} matches (total_count): "
                f"{self.left_out:,} left out because {self.why}; "
                "narrow the search (path, include_patterns, a more specific query) to query them all"
            )
        if is_page:
            return f"this page is the whole result list: all {self.total_count:,} matches (total_count)"
        return f"every match of the result list, all {self.total_count:,} (total_count), not just this page"

    def to_dict(self, *, is_page: bool) -> dict[str, Any]:
        """The descriptor's `dataset` block; `is_page`: the dataset is the page file itself."""
        out: dict[str, Any] = {
            "id": self.file.id,
            "view": dataset_view(self.file.id),
            "path": str(self.file.path),
            "rows": self.rows,
            "total_count": self.total_count,
        }
        if self.left_out:
            out["left_out"] = self.left_out
        out["note"] = self.note(is_page=is_page)
        return out


class ListDatasets:
    """Writes the whole-list datasets of offloaded search pages into the offload store."""

    def __init__(self, store: OffloadStore, *, max_rows: int, max_bytes: int) -> None:
        self.store = store
        self.max_rows, self.max_bytes = max_rows, max_bytes
        self._written: collections.OrderedDict[str, ListDataset] = collections.OrderedDict()
        self._lock = threading.Lock()

    def save(self, whole: WholeList, page: OffloadedFile, page_count: int, *, tool: str, query: str) -> ListDataset:
        """The dataset of `whole`, whose page `page` (of `page_count` records) was just written:
        the page itself when it is the whole list, the file written for an earlier page of the
        list while it exists, else a new file. When that cannot be written, the page, saying so."""
        if page_count >= whole.count:
            return ListDataset(page, page_count, whole.count)
        known = self._known(whole.key)
        if known is not None:
            return known
        rows = BoundedRows(map(Row.of, whole.records()), self.max_bytes, self.max_rows)
        keys: dict[str, None] = {}

        def lines() -> Iterator[bytes]:
            for row in rows:
                if type(row.record) is dict:
                    keys.update(dict.fromkeys(row.record))
                yield row.line

        try:
            written = self.store.write_lines(tool=tool, query=query, lines=lines(), record_keys=lambda: list(keys))
        except StoreWriteError as exc:
            return ListDataset(page, page_count, whole.count, f"the whole list could not be written ({exc})")
        dataset = ListDataset(written, rows.count, whole.count, rows.reached())
        with self._lock:
            self._written[whole.key] = dataset
            while len(self._written) > _REMEMBERED:
                self._written.popitem(last=False)
        return dataset

    def _known(self, key: str) -> ListDataset | None:
        """The dataset written for `key` before, if its file is still there."""
        with self._lock:
            known = self._written.get(key)
            if known is not None:
                self._written.move_to_end(key)
        if known is None:
            return None
        try:
            self.store.path_of(known.file.id)
        except DatasetNotFoundError:
            with self._lock:
                self._written.pop(key, None)
            return None
        return known
