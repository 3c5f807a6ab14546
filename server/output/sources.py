"""What a saved dataset is to its readers, so SQL, listing and paging see every kind alike.

Both kinds of stored file (`FileStore`: offloaded pages with a header line, the proxy's
headerless JSONL with a metadata file) are a `DatasetSource`: it lists its datasets (`infos()`)
and opens one by id (`open()` -> `DatasetFile`), which knows how to read its records and how
DuckDB must view them, so `Datasets` never needs to know which kind wrote a file.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import msgspec

from server.errors import DatasetNotFoundError
from server.output.private_files import open_owned

#: What line 1 of an offloaded page is (`"type": "codepager_header"`), not a record.
HEADER_TYPE = "codepager_header"
#: DuckDB's default `maximum_object_size` for read_json.
DUCKDB_OBJECT_SIZE = 16 * 1024 * 1024


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True, slots=True)
class DatasetInfo:
    """One line of `list-saved-datasets`. `server` is set for proxied results only (the search
    server's own offloaded pages have none), and is then listed."""

    id: str
    tool: str
    query: str
    created: str
    rows: int
    size_bytes: int
    server: str | None = None

    @property
    def view(self) -> str:
        return f"dataset_{self.id}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "view": self.view, "tool": self.tool}
        if self.server is not None:
            out["server"] = self.server
        out.update(query=self.query, created=self.created, rows=self.rows, size_bytes=self.size_bytes)
        return out


@dataclass(frozen=True, slots=True)
class DatasetFile:
    """A dataset's JSONL file and how to read it.

    `header` is true for offloaded pages (line 1 is the codepager header, not a record);
    `record_keys` are the records' top-level keys when known, which keeps header-only keys out
    of the SQL view; without them every key in the file is a column. `columns` are the
    records' DuckDB column types when the producer knows them (text lines): DuckDB then reads
    them instead of inferring them, which costs seconds per megabyte of a long string.
    `max_record_bytes`, when known, lets DuckDB read records over its 16 MB default (a proxied
    reply can be one 50 MB line); DuckDB sizes its buffers by it, so it must be the real size.
    """

    id: str
    path: Path
    count: int
    header: bool = False
    record_keys: tuple[str, ...] = ()
    columns: tuple[tuple[str, str], ...] = ()
    max_record_bytes: int = 0

    def view_sql(self) -> str:
        """SELECT over the file's records only, in the records' own key order. Every key is a
        column however many there are (DuckDB would otherwise read records of over 200 keys
        as one MAP column, leaving nothing for DESCRIBE to show and no column to select)."""
        path = quote_literal(str(self.path))
        if not self.count:
            return "SELECT NULL AS empty WHERE false"
        if self.columns:
            types = ", ".join(f"{quote_literal(name)}: {quote_literal(kind)}" for name, kind in self.columns)
            return f"SELECT * FROM read_json({path}, format='newline_delimited', columns={{{types}}}{self._object_size()})"
        if not self.header:
            return (
                f"SELECT * FROM read_json({path}, format='newline_delimited', sample_size=-1, "
                f"map_inference_threshold=-1{self._object_size()})"
            )
        not_header = f"IS DISTINCT FROM {quote_literal(HEADER_TYPE)}"
        if not self.record_keys:  # the records are not objects: one JSON column `value`
            return (
                f"SELECT json AS value FROM read_json_objects({path}, format='newline_delimited') "
                f"WHERE json_extract_string(json, '$.type') {not_header}"
            )
        source = f"read_json({path}, format='newline_delimited', sample_size=-1, map_inference_threshold=-1{self._object_size()})"
        return f'SELECT {", ".join(map(quote_ident, self.record_keys))} FROM {source} WHERE "type" {not_header}'

    def _object_size(self) -> str:
        """DuckDB refuses a record over 16 MB unless told a larger bound."""
        return f", maximum_object_size={self.max_record_bytes + 1}" if self.max_record_bytes >= DUCKDB_OBJECT_SIZE else ""

    def read(self, offset: int, limit: int) -> list[Any]:
        """Records `offset`..`offset + limit` (0-based), decoded; fewer at the end of the file."""
        skip = offset + (1 if self.header else 0)
        try:
            with open_owned(self.path) as f:
                lines = list(itertools.islice(f, skip, skip + limit))
        except (FileNotFoundError, PermissionError):
            raise DatasetNotFoundError(f"dataset {self.id} was removed; recreate it") from None
        return [msgspec.json.decode(line) for line in lines]


class DatasetSource(Protocol):
    """A producer's saved datasets. `open` raises DatasetNotFoundError for an id it lacks."""

    def infos(self) -> list[DatasetInfo]: ...

    def open(self, dataset_id: str) -> DatasetFile: ...
