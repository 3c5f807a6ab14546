"""Read-only SQL over saved datasets (`analyze-with-duckdb`) and their listing.

Datasets come from one or more `DatasetSource`s (offloaded pages; the proxy's saved results).
Each is visible as a view `dataset_<id>` whose rows are the file's records (an offloaded
page's header line filtered out, only the records' own keys as columns). The SQL comes from an
agent, so it is treated as untrusted:
- DuckDB's own parser (`duckdb.extract_statements`) must find exactly one statement, of type
  SELECT (which covers WITH, FROM-first, VALUES, DESCRIBE, SHOW, SUMMARIZE) or a plain EXPLAIN
  of one; everything else (INSERT, COPY, ATTACH, PRAGMA, SET, LOAD/INSTALL, ...) is refused;
- its length, query blocks and relations are bounded before DuckDB plans it (`complexity`):
  planning is neither timed out nor under the memory limit;
- every query runs on a fresh in-memory connection that can reach only the referenced files:
  their paths are allowed, then external access is disabled and the configuration locked, so
  `read_csv('/etc/passwd')`, `glob(...)`, extension loading and network reads all fail;
- memory, threads, wall time and the number of rows returned are bounded, and so is the
  number of queries running at once (`Slots`), so that the memory limit times that number
  bounds them all;
- DuckDB spills to a temp dir of its own per query (0700, removed afterwards), never the
  default `.tmp` in the server's working directory: DuckDB always lets SQL read its temp dir,
  so a shared one would expose whatever else is in it;
- rows reach Python a batch at a time. DuckDB 2's Python client streams a result as it is
  fetched; 1.x's (the newest Python 3.10 can install) holds the whole result before the first
  row, so there the result is first written into a table inside DuckDB (`Spool`), where its
  memory limit holds (the rest spills to the temp dir, itself capped), and read back by rowid.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import re
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

import duckdb
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from infra import Slots
from server.errors import (
    MAX_ERROR_CHARS,
    DatasetNotFoundError,
    SqlExecutionError,
    SqlRejectedError,
    SqlTimeoutError,
)
from server.output import (
    ULID_PATTERN,
    DatasetFile,
    DatasetInfo,
    DatasetSource,
    ListPage,
    Row,
    check_id,
    clip_strings,
    column_key,
    dataset_view,
    dumps_lines,
)
from server.settings import SqlSettings
from server.sql.complexity import check_complexity, check_length
from server.sql.views import quote_ident, quote_literal, view_sql

_VIEW_REF = re.compile(rf"\bdataset_({ULID_PATTERN})\b", re.IGNORECASE)
_EXPLAIN_PREFIX = re.compile(r"^\s*EXPLAIN\s+(?:ANALY[SZ]E\s+)?", re.IGNORECASE)
_LINE_END = re.compile(r"[\n\r]")
_COMMENT_MARK = re.compile(r"/\*|\*/")
#: `/* */` comments nest; DuckDB 1.x's parser takes time quadratic in their depth (8,000 levels,
#: 32 KB: 1.8 s; 50,000: 72 s of CPU before the query even starts, outside its timeout).
MAX_COMMENT_NESTING = 64
#: Rows are fetched in batches of about this many bytes of JSON (the first batch is one row,
#: then the size follows the rows seen so far), and never more rows than DuckDB's vector.
BATCH_BYTES = 1 << 20
MAX_BATCH_ROWS = 2048
#: Whether `con.execute(...).fetchmany` streams (DuckDB 2) or holds the whole result (1.x).
STREAMS = int(duckdb.__version__.split(".", 1)[0]) >= 2
#: What a spooled query may spill to disk (its result beyond the memory limit, sorts, joins).
SPOOL_MAX_SPILL = "4GiB"
#: Queries running at once, each with its own connection and `sql.memory_limit` (a query of
#: 100 KB rows peaks ~600 MB at 512MB), so this times that bounds them all: 2 x 512 MB = 1 GB by
#: default (2 x 1GB on the proxy). 2 is also one query per core at `sql.threads` = 1 on a 2-core
#: machine: more at once would only share the same cores. Not a setting (it was
#: `sql.max_concurrent`): memory_limit is the knob a user holds; a query past the cap waits,
#: within its own timeout. Read when a `Datasets` is made (a test patches it).
MAX_QUERIES = 2
#: The largest LIMIT DuckDB takes (a BIGINT); `sql.max_rows` has no upper bound.
_MAX_LIMIT = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class QueryResult:
    sql: str
    columns: list[str]
    rows: list[dict[str, Any]]
    truncated: bool
    elapsed_ms: float
    datasets: list[str]
    warnings: list[str] = field(default_factory=list)

    def to_page(self, page_size: int | None = None, written: int | None = None) -> ListPage:
        """The rows as a page for `OutputLayer.render` (records_key="rows" reads best); with
        `written`, they are the first of that many written to a file (see `ListPage`)."""
        return ListPage(
            items=self.rows,
            page_size=max(written, 1) if written is not None else page_size,
            written=written,
            search_block={"query": self.sql, "mode": "sql", "parameters": {"datasets": self.datasets}},
            metadata_block={
                "query_time_ms": round(self.elapsed_ms, 3),
                "columns": self.columns,
                "warnings": self.warnings,
            },
            source_truncated=self.truncated,
        )


@dataclass(eq=False)
class QueryStream:
    """The rows of one running query, fetched in batches of about `BATCH_BYTES`.

    A batch's size follows the rows seen so far, so wide rows come a few at a time and narrow
    ones by the thousand; Python never holds more than one batch of what it has not handed
    on. `rows()` stops after `max_rows` rows and then sets `truncated` if there were more.
    Fetch errors are the query's errors: a timeout is SqlTimeoutError, the rest
    SqlExecutionError. `started` is when the call began, by `clock`, so `elapsed_ms` counts
    its wait for a slot and its execution too (a `Spool` runs it whole before the first row),
    and the timeout covers both."""

    sql: str
    datasets: list[str]
    cursor: Cursor = field(repr=False)
    max_rows: int
    timeout_s: float
    started: float
    clock: Callable[[], float] = field(repr=False)
    columns: list[str] = field(init=False)
    truncated: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.columns = _unique_columns([d[0] for d in self.cursor.description or []])

    @property
    def elapsed_ms(self) -> float:
        return (self.clock() - self.started) * 1000

    def rows(self) -> Iterator[Row]:
        fetched, batch = 0, 1
        while fetched < self.max_rows:
            raw = self._fetch(min(batch, self.max_rows - fetched))
            if not raw:
                return
            fetched += len(raw)
            records = [dict(zip(self.columns, map(_jsonable, values), strict=True)) for values in raw]
            body = dumps_lines(records)  # one C call; JSON escapes newlines, so a line is a record
            yield from map(Row, records, body.split(b"\n"))
            batch = max(1, min(MAX_BATCH_ROWS, BATCH_BYTES * len(raw) // len(body)))
        self.truncated = bool(self._fetch(1))

    def result(self, rows: list[dict[str, Any]], cuts: list[str]) -> QueryResult:
        """`rows` of this query as a QueryResult; `cuts` say why rows were left out (the
        max_rows cut, if any, is added)."""
        if self.truncated:
            kept = f"only the first {self.max_rows} rows were kept (sql.max_rows)"
            cuts = [f"{kept}; add LIMIT/OFFSET or aggregate", *cuts]
        return QueryResult(self.sql.strip(), self.columns, rows, bool(cuts), self.elapsed_ms, self.datasets, cuts)

    def _fetch(self, n: int) -> list[tuple[Any, ...]]:
        with sql_errors(self.timeout_s):
            if self.elapsed_ms > self.timeout_s * 1000:
                # The timer's interrupt reaches a streamed query, which runs until its last row,
                # but not a `Spool`, whose reads are statements of their own: one sent between
                # them is lost, and the rows kept coming past the timeout.
                raise duckdb.InterruptException
            return self.cursor.fetchmany(n)


class Cursor(Protocol):
    """What `QueryStream` reads rows from: a DuckDB cursor, or a `Spool`."""

    @property
    def description(self) -> Sequence[tuple[Any, ...]] | None: ...

    def fetchmany(self, size: int) -> list[tuple[Any, ...]]: ...


class Spool:
    """A statement's result written into a table inside DuckDB first, then read back by rowid,
    for DuckDB 1.x, whose Python client would otherwise hold the whole result in Python's
    memory before the first row (a 300 MB SELECT cost +315 MB). Inside DuckDB the table is
    under the connection's memory limit and spills to its temp dir (at most
    `SPOOL_MAX_SPILL`); only `rows` rows are written, the caller's row cap plus one. Its
    columns are numbered (`c1`, ...): a result may name two columns alike, or one `rowid`,
    which would hide the row id the batches are read by. The table, `codepager_result`, is
    visible to the statement's own SHOW TABLES."""

    TABLE = "codepager_result"

    def __init__(self, con: duckdb.DuckDBPyConnection, statement: str, rows: int) -> None:
        relation = con.sql(statement)
        columns = ", ".join(f"#{i} AS c{i}" for i in range(1, len(relation.columns) + 1))
        relation.project(columns).limit(min(rows, _MAX_LIMIT)).create(self.TABLE)
        self.description = [(name,) for name in relation.columns]
        self._con = con
        self._next = 0

    def fetchmany(self, size: int) -> list[tuple[Any, ...]]:
        start, self._next = self._next, self._next + size
        return self._con.execute(
            f"SELECT * FROM {self.TABLE} WHERE rowid >= ? AND rowid < ?", [start, self._next]
        ).fetchall()


@contextlib.contextmanager
def sql_errors(timeout_s: float) -> Iterator[None]:
    """DuckDB's errors as ours: an interrupt is the timeout, the rest a failed query."""
    try:
        yield
    except duckdb.InterruptException:
        raise SqlTimeoutError(f"query ran longer than {timeout_s:g} s and was stopped; add filters or LIMIT") from None
    except duckdb.Error as exc:
        raise SqlExecutionError(_failure(exc)) from None
    except RecursionError:  # DuckDB's Python client walks a deep type's nesting recursively
        raise SqlExecutionError(_too_deep()) from None


def _busy(limits: SqlSettings, slots: int) -> SqlTimeoutError:
    """The timeout of a query that waited its whole time for a slot and never ran."""
    return SqlTimeoutError(
        f"query waited {limits.timeout_s:g} s for its turn and was not run: the server was busy with other "
        f"queries (it runs {slots} at once); try again"
    )


#: DuckDB's error for a record naming one key twice (`{"a": 1, "a": 2}`, which JSON allows).
_DUPLICATE_KEY = re.compile(r'has duplicate key "')


def _failure(exc: duckdb.Error) -> str:
    """DuckDB's message (which echoes the SQL or the data: a 60 KB literal, a 100 KB key),
    clipped, and what to do when it is a failure the SQL did not cause."""
    message = str(exc)
    if _DUPLICATE_KEY.search(message):
        # DuckDB's advice after the first line is about read_json options the view sets.
        return (
            f"query failed: {clip_strings(message.partition(chr(10))[0], MAX_ERROR_CHARS)}\n"
            "The dataset holds a record that repeats a key (JSON allows it; one column cannot hold both values), "
            "so every query reading that key's column fails. Select other columns, or read the records as they "
            "are with read-dataset-page."
        )
    return f"query failed: {clip_strings(message, MAX_ERROR_CHARS)}"


#: How deep a value may nest (lists, structs, maps): deeper is refused rather than handed on to
#: break the MCP SDK's JSON writer (it gives up at ~254 levels) or, at ~990, the stack here.
MAX_NESTING = 64


def _jsonable(value: Any, depth: int = 0) -> Any:
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
    if isinstance(value, (dict, list, tuple)) and depth >= MAX_NESTING:
        raise SqlExecutionError(_too_deep())
    if isinstance(value, dict):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, depth + 1) for v in value]
    return str(value)


def _too_deep() -> str:
    return (
        f"a value nests deeper than {MAX_NESTING} levels; select it as JSON text instead "
        "(to_json(column)::VARCHAR) or select the parts you need"
    )


def _unique_columns(names: Sequence[str]) -> list[str]:
    """`names` made distinct as DuckDB compares them (ignoring ASCII case), in order: a repeated
    name gets the first free `_2`, `_3`, ... suffix, free of every name in the query too
    (`SELECT 1 AS a, 2 AS a, 3 AS a_2` gave two columns `a_2`, and the row kept one value of
    the two; `SELECT 1 AS a, 2 AS A` kept both, and SQL over the saved rows read `a` for `A`)."""
    taken = {column_key(name) for name in names}
    seen: set[str] = set()
    tried: dict[str, int] = {}  # the last suffix tried per name: k repeats cost O(k), not O(k^2)
    out = []
    for name in names:
        key = column_key(name)
        if key in seen:
            n = tried.get(key, 1) + 1
            while column_key(f"{name}_{n}") in taken:
                n += 1
            tried[key] = n
            name = f"{name}_{n}"
            key = column_key(name)
            taken.add(key)
        seen.add(key)
        out.append(name)
    return out


def check_sql(sql: str) -> str:
    """The one read-only statement in `sql`, or SqlRejectedError saying what is allowed."""
    if not sql or not sql.strip():
        raise SqlRejectedError("query is empty; pass one SELECT statement, e.g. SELECT * FROM dataset_<id> LIMIT 10")
    try:
        sql.encode()
    except UnicodeEncodeError as exc:  # a lone surrogate, which DuckDB's binding fails on with a TypeError
        raise SqlRejectedError(f"query is not valid text: {exc.reason} at character {exc.start}") from None
    if _comment_depth(sql) > MAX_COMMENT_NESTING:
        raise SqlRejectedError(f"comments nest more than {MAX_COMMENT_NESTING} deep; remove the nested /* */ comments")
    if re.match(r"PRAGMA\b", _after_comments(sql), re.IGNORECASE):  # DuckDB 1.x rewrites some to a SELECT
        raise SqlRejectedError(
            "only read-only queries are allowed (SELECT, WITH, DESCRIBE, SUMMARIZE, SHOW, EXPLAIN); got a PRAGMA "
            "statement"
        )
    check_length(sql)  # the checks above are linear; parsing is not
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
    else:
        check_complexity(statement.query)
    return statement.query


def _after_comments(sql: str) -> str:
    """`sql` from its first word on, skipping what DuckDB's scanner skips before it: blanks,
    the empty statements of leading `;`, `--` comments (to a line feed or carriage return),
    `/* */` comments, which nest, and non-ASCII characters (DuckDB reads Unicode spaces and a
    byte-order mark as blanks; anything else there would not have parsed). In one linear pass:
    a regex of alternatives would backtrack exponentially over `-- -- -- ...`."""
    i = 0
    while i < len(sql):
        if sql[i].isspace() or sql[i] == ";" or not sql[i].isascii():
            i += 1
        elif sql.startswith("--", i):
            end = _LINE_END.search(sql, i)
            i = len(sql) if end is None else end.end()
        elif sql.startswith("/*", i):
            i = _comment_end(sql, i + 2)
        else:
            break
    return sql[i:]


def _comment_depth(sql: str) -> int:
    """How deep `/* */` comments nest in `sql` at most, counted in one pass; an upper bound,
    as a `/*` inside a string literal counts too (no query needs dozens of them)."""
    depth = deepest = 0
    for mark in _COMMENT_MARK.finditer(sql):
        depth = depth + 1 if mark[0] == "/*" else max(depth - 1, 0)
        deepest = max(deepest, depth)
    return deepest


def _comment_end(sql: str, i: int) -> int:
    """Where the `/*` comment whose text starts at `i` ends (after its `*/`; nested ones
    count), or the end of `sql`."""
    depth = 1
    while depth:
        mark = _COMMENT_MARK.search(sql, i)
        if mark is None:
            return len(sql)
        depth += 1 if mark[0] == "/*" else -1
        i = mark.end()
    return i


def _instant(text: str, *, end_of_day: bool) -> dt.datetime:
    """An ISO date or date-time as an aware UTC instant; a bare date bound is the start of that
    day, or (for an upper bound) the start of the next one."""
    text = text.strip()
    # Python 3.10's fromisoformat takes neither a "Z" suffix nor the forms 3.11 added; UTC
    # spelled "Z" is what dataset timestamps and agents write.
    value = dt.datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text)
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    if end_of_day and len(text) == 10:
        try:
            value += dt.timedelta(days=1)
        except OverflowError:  # the last day datetime holds (9999-12-31): its end is the end of time
            return dt.datetime.max.replace(tzinfo=dt.timezone.utc)
    return value


class DatasetFilter(BaseModel):
    """What `list-saved-datasets` can narrow by (all optional, all must hold)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str | None = Field(None, description="exact tool name that produced the dataset")
    server: str | None = Field(None, description="exact name of the proxied server it came from")
    date_from: str | None = Field(None, description="created at or after: ISO date (2025-01-31) or date-time")
    date_to: str | None = Field(None, description="created at or before: ISO date (whole day included) or date-time")
    text: str | None = Field(None, description="case-insensitive substring of id, tool, server or query")

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, value: Any) -> Any:
        """Unknown keys as one error, not one each: pydantic's error per key of an object of
        380,000 cost seconds of the event loop to build and format."""
        if isinstance(value, dict) and len(value) > len(cls.model_fields):
            unknown = [key for key in value if key not in cls.model_fields]
            raise ValueError(
                f"{len(unknown):,} unknown keys (e.g. {', '.join(repr(str(k)[:40]) for k in unknown[:3])}); it takes "
                f"{', '.join(cls.model_fields)}"
            )
        return value

    @field_validator("date_from", "date_to")
    @classmethod
    def _iso(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                _instant(value, end_of_day=False)
            except ValueError:
                raise ValueError(
                    f"{value!r} is not an ISO date like 2025-01-31 or date-time like 2025-01-31T12:00:00Z"
                ) from None
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
    """Lists saved datasets from its sources (asked in order) and runs read-only SQL over them."""

    def __init__(
        self,
        *sources: DatasetSource,
        limits: SqlSettings | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        """`limits`: the `[sql]` settings every query runs under (the defaults without);
        `clock`: seconds, for query times and the timeout of waiting for a slot and reading
        rows."""
        if not sources:
            raise ValueError("Datasets needs at least one source of datasets")
        self.sources = list(sources)
        self.limits = limits or SqlSettings()
        self.clock = clock
        #: The queries running at once, each with its connection (`MAX_QUERIES`).
        self.slots = Slots(MAX_QUERIES, clock)

    @property
    def spool(self) -> bool:
        """Whether queries run through a `Spool`: where DuckDB cannot stream (1.x). Not a
        setting (it was, `offload.duckdb_fetch`, and nobody set it): streaming is what DuckDB 2
        does well, and on 1.x only the spool bounds a result's memory."""
        return not STREAMS

    def infos(self, filter: str | DatasetFilter | None = None) -> list[DatasetInfo]:
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

    @contextlib.contextmanager
    def stream(self, sql: str, dataset_id: str | None = None) -> Iterator[QueryStream]:
        """Run one read-only statement and stream its rows; the connection, its temp dir, its
        slot (`slots`) and the timeout last until the block ends. Waiting for a slot counts
        against the timeout. With `dataset_id`, that dataset is also the view `dataset`."""
        statement = check_sql(sql)
        ids = list(dict.fromkeys(m.upper() for m in _VIEW_REF.findall(statement)))
        if dataset_id is not None:
            ids = [check_id(dataset_id), *(i for i in ids if i != dataset_id)]
        limits = self.limits
        started = self.clock()
        deadline = started + limits.timeout_s
        with (
            self.slots.hold(deadline, lambda: _busy(limits, self.slots.size)),
            tempfile.TemporaryDirectory(prefix="codepager-duckdb-") as spill,
            contextlib.closing(self._connect(ids, alias=dataset_id, temp_dir=spill)) as con,
        ):
            left = deadline - self.clock()
            if left <= 0:  # its slot came too late, and an interrupt sent before the statement is lost
                raise _busy(limits, self.slots.size)
            timer = threading.Timer(left, con.interrupt)
            timer.start()
            try:
                with sql_errors(limits.timeout_s):
                    # A plan is a few rows, and no relation. `check_sql` parsed the statement and
                    # let an EXPLAIN through only with the word at its start.
                    explain = _EXPLAIN_PREFIX.match(statement) is not None
                    cursor: Cursor = (
                        Spool(con, statement, limits.max_rows + 1)
                        if self.spool and not explain
                        else con.execute(statement)
                    )
                yield QueryStream(
                    statement,
                    ids,
                    cursor,
                    max_rows=limits.max_rows,
                    timeout_s=limits.timeout_s,
                    started=started,
                    clock=self.clock,
                )
            finally:
                timer.cancel()

    def _connect(self, ids: list[str], *, alias: str | None, temp_dir: str) -> duckdb.DuckDBPyConnection:
        """A fresh in-memory connection with views for `ids`, then sealed (see module doc).
        It spills to `temp_dir`, which SQL can read too (DuckDB allows its own temp dir), so
        that must be a fresh private directory."""
        con = duckdb.connect(
            ":memory:",
            config={
                "threads": self.limits.threads,
                "memory_limit": self.limits.memory_limit,
                "temp_directory": temp_dir,
                **({"max_temp_directory_size": SPOOL_MAX_SPILL} if self.spool else {}),
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": False,
            },
        )
        try:
            paths = []
            for dataset_id in ids:
                file = self.open(dataset_id)
                view = view_sql(file)
                con.execute(f"CREATE VIEW {quote_ident(dataset_view(dataset_id))} AS {view}")
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
