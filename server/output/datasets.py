"""Read-only SQL over saved datasets (`analyze-with-duckdb`) and their listing.

Datasets come from one or more `DatasetSource`s (offloaded pages; the proxy's saved results).
Each is visible as a view `dataset_<id>` whose rows are the file's records (an offloaded
page's header line filtered out, only the records' own keys as columns). The SQL comes from an
agent, so it is treated as untrusted:
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
from typing import Any

import duckdb
from pydantic import BaseModel, ConfigDict, Field, field_validator

from server.output.offload import ULID_PATTERN, DatasetNotFoundError, OffloadStore, check_id
from server.output.pages import ListPage
from server.output.sources import (
    DatasetFile,
    DatasetInfo,
    DatasetSource,
    OffloadedResults,
    quote_ident,
    quote_literal,
)
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


def _instant(text: str, *, end_of_day: bool) -> dt.datetime:
    """An ISO date or date-time as an aware UTC instant; a bare date bound is the start of that
    day, or (for an upper bound) the start of the next one."""
    value = dt.datetime.fromisoformat(text.strip())
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    if end_of_day and len(text.strip()) == 10:
        value += dt.timedelta(days=1)
    return value


class DatasetFilter(BaseModel):
    """What `list-saved-datasets` can narrow by (all optional, all must hold)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str | None = Field(None, description="exact tool name that produced the dataset")
    server: str | None = Field(None, description="exact name of the proxied server it came from")
    date_from: str | None = Field(None, description="created at or after: ISO date (2025-01-31) or date-time")
    date_to: str | None = Field(None, description="created at or before: ISO date (whole day included) or date-time")
    text: str | None = Field(None, description="case-insensitive substring of id, tool, server or query")

    @field_validator("date_from", "date_to")
    @classmethod
    def _iso(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                _instant(value, end_of_day=False)
            except ValueError:
                raise ValueError(f"{value!r} is not an ISO date like 2025-01-31 or date-time like 2025-01-31T12:00:00Z") from None
        return value

    def matches(self, info: DatasetInfo) -> bool:
        if self.tool is not None and info.tool != self.tool:
            return False
        if self.server is not None and info.server != self.server:
            return False
        if self.text and self.text.lower() not in f"{info.id}\n{info.tool}\n{info.server or ''}\n{info.query}".lower():
            return False
        if self.date_from is None and self.date_to is None:
            return True
        try:
            created = _instant(info.created, end_of_day=False)
        except ValueError:
            return False
        if self.date_from is not None and created < _instant(self.date_from, end_of_day=False):
            return False
        if self.date_to is None:
            return True
        bound = _instant(self.date_to, end_of_day=True)
        return created < bound if len(self.date_to.strip()) == 10 else created <= bound


class Datasets:
    """Lists saved datasets from its sources and runs read-only SQL over them.

    Sources are asked in order; an `OffloadStore` is accepted as the source of its own files."""

    def __init__(
        self,
        *sources: OffloadStore | DatasetSource,
        memory_limit: str = "512MB",
        threads: int = 1,
        timeout_s: float = 30.0,
        max_rows: int = 100_000,
    ) -> None:
        if not sources:
            raise ValueError("Datasets needs at least one source of datasets")
        self.sources: list[DatasetSource] = [
            OffloadedResults(s) if isinstance(s, OffloadStore) else s for s in sources
        ]
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

    def list(self, filter: str | DatasetFilter | None = None) -> list[DatasetInfo]:
        """Datasets, newest first. A string `filter` matches id, tool, server or query text
        (case-insensitive); a `DatasetFilter` narrows by tool, server and creation date too."""
        wanted = DatasetFilter(text=filter) if isinstance(filter, str) or filter is None else filter
        infos = [i for source in self.sources for i in source.infos() if wanted.matches(i)]
        return sorted(infos, key=lambda i: i.id, reverse=True)  # ULIDs sort by creation time

    def open(self, dataset_id: str) -> DatasetFile:
        """The dataset with this id, from whichever source has it."""
        check_id(dataset_id)
        missing: list[DatasetNotFoundError] = []
        for source in self.sources:
            try:
                return source.open(dataset_id)
            except DatasetNotFoundError as exc:
                missing.append(exc)
        if len(missing) == 1:
            raise missing[0]
        raise DatasetNotFoundError(
            f"no dataset {dataset_id}: it expired or was removed (see list-saved-datasets); "
            "call the tool that produced it again"
        )

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
                file = self.open(dataset_id)
                view = file.view_sql()
                con.execute(f"CREATE VIEW {quote_ident('dataset_' + dataset_id)} AS {view}")
                if dataset_id == alias:
                    con.execute(f"CREATE VIEW dataset AS {view}")
                paths.append(str(file.path))
            if paths:
                con.execute(f"SET allowed_paths = [{', '.join(map(quote_literal, paths))}]")
            con.execute("SET enable_external_access = false")
            con.execute("SET lock_configuration = true")
        except DatasetNotFoundError:
            con.close()
            raise
        except duckdb.Error as exc:
            con.close()
            raise SqlExecutionError(f"could not open the dataset views: {exc}") from None
        return con
