"""Read-only SQL over offloaded results (`analyze-with-duckdb`) and their listing.

Each offloaded file is visible as a view `dataset_<id>` whose rows are the file's records (the
header line filtered out, only the records' own keys as columns). The SQL comes from an agent, so it is
treated as untrusted:
- DuckDB's own parser (`duckdb.extract_statements`) must find exactly one statement, of type
  SELECT (which covers WITH, FROM-first, VALUES, DESCRIBE, SHOW, SUMMARIZE) or a plain EXPLAIN
  of one; everything else (INSERT, COPY, ATTACH, PRAGMA, SET, LOAD/INSTALL, ...) is refused;
- every query runs on a fresh in-memory connection that can reach only the referenced files:
  their paths are allowed, then external access is disabled and the configuration locked, so
  `read_csv('/etc/passwd')`, `glob(...)`, extension loading and network reads all fail;
- memory, threads, wall time and the number of rows returned are bounded.
Rows come back as JSON-ready records so they go through the same output layer as search
results: a huge SELECT is paged or offloaded like any other large answer.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb

from server.output.offload import HEADER_TYPE, ULID_PATTERN, DatasetNotFoundError, OffloadStore, check_id
from server.output.pages import ListPage
from server.settings import OffloadSettings

_VIEW_REF = re.compile(rf"\bdataset_({ULID_PATTERN})\b", re.IGNORECASE)
_EXPLAIN_PREFIX = re.compile(r"^\s*EXPLAIN\s+(?:ANALY[SZ]E\s+)?", re.IGNORECASE)


class SqlRejectedError(ValueError):
    """The SQL is not a single read-only statement, or does not parse."""


class SqlExecutionError(ValueError):
    """The SQL was accepted but failed (unknown column, type error, permission, memory)."""


class SqlTimeoutError(SqlExecutionError, TimeoutError):
    pass


@dataclass(frozen=True, slots=True)
class DatasetInfo:
    id: str
    tool: str
    query: str
    created: str
    rows: int
    size_bytes: int

    @property
    def view(self) -> str:
        return f"dataset_{self.id}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "view": self.view,
            "tool": self.tool,
            "query": self.query,
            "created": self.created,
            "rows": self.rows,
            "size_bytes": self.size_bytes,
        }


@dataclass(frozen=True, slots=True)
class QueryResult:
    sql: str
    columns: list[str]
    rows: list[dict[str, Any]]
    truncated: bool
    elapsed_ms: float
    datasets: list[str]

    def to_page(self, page_size: int | None = None) -> ListPage:
        """The rows as a page for `OutputLayer.render` (records_key="rows" reads best)."""
        warnings = (
            [f"only the first {len(self.rows)} rows were kept; add LIMIT/OFFSET or aggregate"] if self.truncated else []
        )
        return ListPage(
            items=self.rows,
            page_size=page_size,
            search_block={"query": self.sql, "mode": "sql", "parameters": {"datasets": self.datasets}},
            metadata_block={"query_time_ms": round(self.elapsed_ms, 3), "columns": self.columns, "warnings": warnings},
            source_truncated=self.truncated,
        )


def _jsonable(value: Any) -> Any:
    """DuckDB's Python values as JSON values (NaN/Infinity, which JSON lacks, become strings)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Decimal):
        return float(value) if value.is_finite() else str(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


def _unique_columns(names: Sequence[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in names:
        n = seen.get(name, 0) + 1
        seen[name] = n
        out.append(name if n == 1 else f"{name}_{n}")
    return out


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def check_sql(sql: str) -> str:
    """The one read-only statement in `sql`, or SqlRejectedError saying what is allowed."""
    if not sql or not sql.strip():
        raise SqlRejectedError("query is empty; pass one SELECT statement, e.g. SELECT * FROM dataset_<id> LIMIT 10")
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise SqlRejectedError(f"query does not parse: {exc}") from None
    if len(statements) != 1:
        raise SqlRejectedError(f"pass exactly one statement per call (got {len(statements)})")
    statement = statements[0]
    if statement.type == duckdb.StatementType.EXPLAIN:
        inner = _EXPLAIN_PREFIX.sub("", statement.query, count=1)
        if inner == statement.query:
            raise SqlRejectedError("put EXPLAIN at the start of the query")
        check_sql(inner)
    elif statement.type != duckdb.StatementType.SELECT:
        raise SqlRejectedError(
            f"only read-only queries are allowed (SELECT, WITH, DESCRIBE, SUMMARIZE, SHOW, EXPLAIN); "
            f"got a {statement.type.name} statement"
        )
    return statement.query


class Datasets:
    """Lists offloaded results and runs read-only SQL over them."""

    def __init__(
        self,
        store: OffloadStore,
        *,
        memory_limit: str = "512MB",
        threads: int = 1,
        timeout_s: float = 30.0,
        max_rows: int = 100_000,
    ) -> None:
        self.store = store
        self.memory_limit = memory_limit
        self.threads = threads
        self.timeout_s = timeout_s
        self.max_rows = max_rows

    @classmethod
    def from_settings(cls, store: OffloadStore, settings: OffloadSettings) -> Datasets:
        return cls(
            store,
            memory_limit=settings.duckdb_memory_limit,
            threads=settings.duckdb_threads,
            timeout_s=settings.duckdb_timeout_s,
            max_rows=settings.duckdb_max_rows,
        )

    def list(self, filter: str | None = None) -> list[DatasetInfo]:
        """Offloaded results, newest first; `filter` matches id, tool or query (case-insensitive)."""
        needle = (filter or "").lower()
        out = []
        for f in reversed(self.store.files()):
            try:
                header = self.store.read_header(f.id)
            except (OSError, LookupError):
                continue  # removed or rewritten between listing and reading: not a dataset now
            info = DatasetInfo(
                id=f.id,
                tool=str(header.get("tool", f.tool)),
                query=str(header.get("query", "")),
                created=str(header.get("timestamp", "")),
                rows=int(header.get("count", 0)),
                size_bytes=f.size_bytes,
            )
            if needle in f"{info.id}\n{info.tool}\n{info.query}".lower():
                out.append(info)
        return out

    def query(self, sql: str, dataset_id: str | None = None) -> QueryResult:
        """Run one read-only statement. With `dataset_id`, that dataset is also the view `dataset`."""
        statement = check_sql(sql)
        ids = list(dict.fromkeys(m.upper() for m in _VIEW_REF.findall(statement)))
        if dataset_id is not None:
            ids = [check_id(dataset_id), *(i for i in ids if i != dataset_id)]
        started = time.perf_counter()
        con = self._connect(ids, alias=dataset_id)
        try:
            timer = threading.Timer(self.timeout_s, con.interrupt)
            timer.start()
            try:
                cursor = con.execute(statement)
                columns = _unique_columns([d[0] for d in cursor.description or []])
                raw = cursor.fetchmany(self.max_rows + 1)
            except duckdb.InterruptException:
                raise SqlTimeoutError(
                    f"query ran longer than {self.timeout_s:g} s and was stopped; add filters or LIMIT"
                ) from None
            except duckdb.Error as exc:
                raise SqlExecutionError(f"query failed: {exc}") from None
            finally:
                timer.cancel()
        finally:
            con.close()
        truncated = len(raw) > self.max_rows
        rows = [dict(zip(columns, map(_jsonable, row), strict=True)) for row in raw[: self.max_rows]]
        return QueryResult(
            sql=statement.strip(),
            columns=columns,
            rows=rows,
            truncated=truncated,
            elapsed_ms=(time.perf_counter() - started) * 1000,
            datasets=ids,
        )

    def _connect(self, ids: list[str], *, alias: str | None) -> duckdb.DuckDBPyConnection:
        """A fresh in-memory connection with views for `ids`, then sealed (see module doc)."""
        con = duckdb.connect(
            ":memory:",
            config={
                "threads": self.threads,
                "memory_limit": self.memory_limit,
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": False,
            },
        )
        try:
            paths = []
            for dataset_id in ids:
                path = self.store.path_of(dataset_id)
                header = self.store.read_header(dataset_id)
                view = self._view_sql(path, header)
                con.execute(f"CREATE VIEW {_quote_ident('dataset_' + dataset_id)} AS {view}")
                if dataset_id == alias:
                    con.execute(f"CREATE VIEW dataset AS {view}")
                paths.append(str(path))
            if paths:
                con.execute(f"SET allowed_paths = [{', '.join(map(_quote_literal, paths))}]")
            con.execute("SET enable_external_access = false")
            con.execute("SET lock_configuration = true")
        except DatasetNotFoundError:
            con.close()
            raise
        except duckdb.Error as exc:
            con.close()
            raise SqlExecutionError(f"could not open the dataset views: {exc}") from None
        return con

    @staticmethod
    def _view_sql(path: Path, header: dict[str, Any]) -> str:
        """SELECT over the file's records: the header row filtered out, and only the records' own
        keys as columns, in their order (the header's keys would otherwise show up as columns)."""
        record_keys = header.get("record_keys") or []
        if not header.get("count"):
            return "SELECT NULL AS empty WHERE false"
        not_header = f"IS DISTINCT FROM {_quote_literal(HEADER_TYPE)}"
        if not record_keys:  # the records are not objects: one JSON column `value`
            return (
                f"SELECT json AS value FROM read_json_objects({_quote_literal(str(path))}, "
                f"format='newline_delimited') WHERE json_extract_string(json, '$.type') {not_header}"
            )
        source = f"read_json({_quote_literal(str(path))}, format='newline_delimited', sample_size=-1)"
        columns = ", ".join(map(_quote_ident, record_keys))
        return f'SELECT {columns} FROM {source} WHERE "type" {not_header}'
