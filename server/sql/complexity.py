"""How much work an untrusted query may ask DuckDB for before its time and memory limits can act.

`offload.duckdb_timeout_s` interrupts a running query and `duckdb_memory_limit` bounds its
buffers, but neither covers parsing, binding and planning: a query's plan and executor state
are not counted against the memory limit, and an interrupt is not checked while they are built.
Found by an audit, through the real tool: 35,000 CTEs (0.7 MB of SQL) held a worker thread
21 s under a 2 s timeout, and a 4 MiB query would have held it for minutes; 10,000 `UNION ALL`
branches (190 KB) took the server from 160 MB to 1.3 GB before DuckDB failed an allocation;
500 tables in one FROM took 6 s to plan (cubic: 1,000 take about 50 s).

So a query is measured first, cheaply, on DuckDB's own parse (`json_serialize_sql`, which only
parses): its length, its query blocks (each SELECT: union branches, CTEs, subqueries) and the
relations it reads (tables, table functions, subqueries in FROM, joins). The bounds sit far above
what an agent's analysis asks for (a few dozen of each) and far below where the cost shows.
"""

from __future__ import annotations

import re
import threading

import duckdb

from server.errors import SqlRejectedError

#: The longest query taken, in UTF-8 bytes: parsing grows faster than the length.
MAX_QUERY_BYTES = 64 * 1024
#: Query blocks (SELECT nodes) in one query: 256 UNION ALL branches plan
#: in 10 ms; 4,000 took the server to 600 MB.
MAX_QUERY_BLOCKS = 256
#: Relations read by one query: 100 tables in one FROM plan in 50 ms; 300 took 1.2 s.
MAX_RELATIONS = 100

#: Only SELECT nodes: DuckDB 1.x nests a UNION of n branches as n - 1 set operations, 2 as one.
_BLOCK = re.compile(r'"type":"SELECT_NODE"')
_RELATION = re.compile(r'"type":"(?:BASE_TABLE|TABLE_FUNCTION|SUBQUERY|EXPRESSION_LIST)"')
_parsers = threading.local()


def _parser() -> duckdb.DuckDBPyConnection:
    """This thread's connection for parsing only: it holds no data and runs no user SQL, so it
    is kept (a connection takes about 15 ms to open) rather than opened per query."""
    con: duckdb.DuckDBPyConnection | None = getattr(_parsers, "con", None)
    if con is None:
        con = _parsers.con = duckdb.connect(
            ":memory:",
            config={"threads": 1, "autoinstall_known_extensions": False, "autoload_known_extensions": False},
        )
    return con


def check_length(sql: str) -> None:
    """SqlRejectedError when `sql` is longer than `MAX_QUERY_BYTES`: checked before any parse."""
    size = len(sql.encode())
    if size > MAX_QUERY_BYTES:
        raise SqlRejectedError(
            f"the query is {size:,} bytes, over the {MAX_QUERY_BYTES:,} allowed; write a shorter query "
            "(filter with WHERE, or put long value lists in a join against another dataset)"
        )


def check_complexity(statement: str) -> None:
    """SqlRejectedError when one SELECT `statement` (already parsed once, and of that type)
    has more query blocks or relations than allowed, saying which and what to do."""
    row = _parser().execute("SELECT json_serialize_sql($1)", [statement]).fetchone()
    tree = row[0] if row else ""
    blocks, relations = len(_BLOCK.findall(tree)), len(_RELATION.findall(tree))
    if blocks > MAX_QUERY_BLOCKS:
        raise SqlRejectedError(
            f"the query has {blocks:,} SELECT blocks (UNION branches, CTEs, subqueries), over the "
            f"{MAX_QUERY_BLOCKS} allowed; split it into several calls"
        )
    if relations > MAX_RELATIONS:
        raise SqlRejectedError(
            f"the query reads {relations:,} relations (tables, table functions, VALUES lists, subqueries), "
            f"over the {MAX_RELATIONS} allowed; split it into several calls"
        )
