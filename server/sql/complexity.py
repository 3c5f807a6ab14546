"""How much work an untrusted query may ask DuckDB for before its time and memory limits can act.

`sql.timeout_s` interrupts a running query and `sql.memory_limit` bounds its
buffers, but neither covers parsing, binding and planning: a query's plan and executor state
are not counted against the memory limit, and an interrupt is not checked while they are built.
Found by an audit, through the real tool: 35,000 CTEs (0.7 MB of SQL) held a worker thread
21 s under a 2 s timeout; 10,000 `UNION ALL` branches (190 KB) took the server from 160 MB to
1.3 GB; 500 tables in one FROM took 6 s to plan. A review then found that a count of the whole
query is not enough: join order search is per FROM, and on DuckDB 1.x 40 tables joined each to
each (15 KB) took 7 s, 80 took 194 s and 2 GB; and 20 `NOT MATERIALIZED` CTEs, each joining
the previous one twice, are a 1 KB query the planner inlines into 2^20 relations (16 s, 1.9 GB).

So a query is measured first, cheaply, on DuckDB's own parse (`json_serialize_sql`, which only
parses): its length, its SELECT blocks (union branches, CTEs, subqueries), the relations each
FROM joins and all of them together (tables, table functions, VALUES lists, subqueries), and
whether it asks for CTEs to be inlined. The bounds sit far above what an agent's analysis asks
for and far below where the cost shows, on DuckDB 1.x as on 2.
"""

from __future__ import annotations

import itertools
import re
import threading
from typing import Any

import duckdb
import msgspec

from server.errors import SqlRejectedError

#: The longest query taken, in UTF-8 bytes: parsing grows faster than the length.
MAX_QUERY_BYTES = 64 * 1024
#: SELECT blocks in one query: 256 UNION ALL branches plan in 10 ms; 4,000 took the server to 600 MB.
MAX_QUERY_BLOCKS = 256
#: Relations one FROM joins: 24 joined each to each plan in 0.6 s on DuckDB 1.5 (40: 7 s).
MAX_JOINED = 24
#: Relations in the whole query: four FROMs of the most each may join.
MAX_RELATIONS = 4 * MAX_JOINED
_WORD = re.compile(r"\w+")
#: Parse-tree node types: a SELECT block, and the table references a FROM joins.
_BLOCK = "SELECT_NODE"
_RELATIONS = frozenset({"BASE_TABLE", "TABLE_FUNCTION", "SUBQUERY", "EXPRESSION_LIST"})
_BLOCK_TEXT = re.compile(f'"type":"{_BLOCK}"')
_RELATION_TEXT = re.compile('"type":"(?:' + "|".join(sorted(_RELATIONS)) + ')"')
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
    """SqlRejectedError when one SELECT `statement` (already parsed once, and of that type) is
    over a bound, saying which and what to do."""
    if _inlines_ctes(statement):
        raise SqlRejectedError("NOT MATERIALIZED is not allowed (an inlined CTE can multiply the plan); remove it")
    row = _parser().execute("SELECT json_serialize_sql($1)", [statement]).fetchone()
    tree = row[0] if row else "{}"
    try:
        joined = _joined_per_block(msgspec.json.decode(tree))
    except (msgspec.DecodeError, RecursionError):  # a tree too deep to decode (a type 990 levels deep)
        # counted on the text instead, as if every relation were in one FROM: never less strict
        relations = len(_RELATION_TEXT.findall(tree))
        joined = [relations, *[0] * (len(_BLOCK_TEXT.findall(tree)) - 1)]
    if len(joined) > MAX_QUERY_BLOCKS:
        raise SqlRejectedError(
            f"the query has {len(joined):,} SELECT blocks (UNION branches, CTEs, subqueries), over the "
            f"{MAX_QUERY_BLOCKS} allowed; split it into several calls"
        )
    if joined and max(joined) > MAX_JOINED:
        raise SqlRejectedError(
            f"one FROM joins {max(joined):,} relations (tables, table functions, VALUES lists, subqueries), over "
            f"the {MAX_JOINED} allowed; split it into several calls"
        )
    if sum(joined) > MAX_RELATIONS:
        raise SqlRejectedError(
            f"the query reads {sum(joined):,} relations (tables, table functions, VALUES lists, subqueries), "
            f"over the {MAX_RELATIONS} allowed; split it into several calls"
        )


def _inlines_ctes(statement: str) -> bool:
    """Whether `statement` says NOT MATERIALIZED (DuckDB 1.x's parse tree does not show it), as
    tokens, so a comment between the words or the words in a string change nothing."""
    keyword, comment = duckdb.token_type.keyword, duckdb.token_type.comment
    words = [
        m.group(0).lower() if kind == keyword and (m := _WORD.match(statement, i)) else ""
        for i, kind in duckdb.tokenize(statement)
        if kind != comment  # DuckDB 2 lists comments; 1.x leaves them out
    ]
    return ("not", "materialized") in set(itertools.pairwise(words))


def _joined_per_block(tree: Any) -> list[int]:
    """For each SELECT block of a parse tree, how many relations its FROM joins. Iterative: the
    tree is as deep as the query nests."""
    joined, stack = [], [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("type") == _BLOCK:
                joined.append(_relations(node.get("from_table")))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return joined


def _relations(ref: Any) -> int:
    """The relations a FROM clause's table reference joins (a subquery counts as one)."""
    count, refs = 0, [ref]
    while refs:
        r = refs.pop()
        if isinstance(r, dict) and r.get("type") == "JOIN":
            refs += [r.get("left"), r.get("right")]
        elif isinstance(r, dict) and r.get("type") in _RELATIONS:
            count += 1
    return count
