"""Records on their way into a file, one at a time: `Row` (a record and its JSON line, encoded
once) and `BoundedRows` (rows up to a count and a byte total). A whole SQL result and a whole
search result list are both written this way, so neither is ever held twice, and both stop at
the same caps (`sql.max_rows`, `MAX_RESULT_BYTES`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from server.output.jsontext import dumps_bytes

#: JSON bytes of one SQL result written to its offload file, and of the whole result list an
#: offloaded search page names as its dataset. Not a setting (it was `sql.max_result_bytes`):
#: `sql.max_rows` is the cap a user thinks in; this one only bounds the disk a query of very
#: wide rows fills (64 MiB is ~640 rows of 100 KB, more than an agent reads back), and a result
#: cut by it says so and how to narrow the query.
MAX_RESULT_BYTES = 64 << 20


@dataclass(frozen=True, slots=True)
class Row:
    """One record and its JSON line (without the newline), encoded once."""

    record: Any
    line: bytes

    @classmethod
    def of(cls, record: Any) -> Row:
        return cls(record, dumps_bytes(record))

    @property
    def size(self) -> int:
        """Bytes the row takes in a JSONL file."""
        return len(self.line) + 1


class BoundedRows:
    """`rows` up to `max_rows` rows (None: any number) and `max_bytes` of JSON lines in all;
    afterwards `count` says how many passed and `reached()` which cap stopped the rest."""

    def __init__(self, rows: Iterable[Row], max_bytes: int, max_rows: int | None = None) -> None:
        self.rows, self.max_bytes, self.max_rows = rows, max_bytes, max_rows
        self.count = 0
        self._reached: str | None = None

    def __iter__(self) -> Iterator[Row]:
        size = 0
        for row in self.rows:
            if self.max_rows is not None and self.count >= self.max_rows:
                self._reached = f"it reached sql.max_rows ({self.max_rows:,} rows)"
                return
            size += row.size
            if size > self.max_bytes:
                self._reached = f"its JSON reached {self.max_bytes:,} bytes, the most one result keeps"
                return
            self.count += 1
            yield row

    @property
    def cut(self) -> bool:
        return self._reached is not None

    def reached(self) -> str | None:
        """Which cap stopped the rows ("its JSON reached 1,024 bytes, ..."),
        or None when every row passed."""
        return self._reached
