"""analyze-with-duckdb's engine: real DuckDB over real offloaded files; every statement that is
not a single read-only query is refused, and the connection cannot reach other files."""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest

from server.errors import (
    DatasetNotFoundError,
    InvalidDatasetIdError,
    SqlExecutionError,
    SqlRejectedError,
    SqlTimeoutError,
)
from server.output import OffloadStore
from server.settings import SqlSettings
from server.sql import Datasets
from server.sql import datasets as sql_datasets
from tests.output_helpers import make_layer, make_records, options, query
from tests.slot_helpers import Overlap, run_at_once


@pytest.fixture(autouse=True, params=["stream", "spool"])
def fetching(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs both ways rows reach Python (DuckDB's version decides): the cursor
    DuckDB 2 streams, and the `Spool` DuckDB 1.x needs (Python 3.10 gets 1.x), whichever
    DuckDB is installed."""
    monkeypatch.setattr(sql_datasets, "STREAMS", request.param == "stream")


@pytest.fixture
def store(tmp_path: Path) -> OffloadStore:
    return OffloadStore(tmp_path / "out")


@pytest.fixture
def records() -> list[dict[str, Any]]:
    return make_records(60, scored=True, context=True)


@pytest.fixture
def dataset(store: OffloadStore, records: list[dict[str, Any]]) -> str:
    return store.write(tool="semantic_search", query="parse config", records=records, page=1, next_cursor="c").id


def test_view_rows_are_the_records_without_the_header(
    store: OffloadStore, dataset: str, records: list[dict[str, Any]]
) -> None:
    ds = Datasets(store)
    result = query(ds, f"SELECT * FROM dataset_{dataset}")
    assert result.columns == ["file", "match", "type", "context"]  # no header-only columns
    assert result.rows == records and not result.truncated and result.datasets == [dataset]
    per_file = query(
        ds,
        f"SELECT file.path AS path, count(*) AS n, max(match.score) AS best FROM dataset_{dataset.lower()} "
        "GROUP BY ALL ORDER BY path",
    ).rows
    assert {r["path"]: r["n"] for r in per_file} == dict(Counter(r["file"]["path"] for r in records))


def test_query_time_counts_the_execution(store: OffloadStore, dataset: str) -> None:
    """DuckDB runs an aggregate whole before its first row, and a spool any statement: the
    reported query time must include that (it started after the statement had run)."""
    started = time.perf_counter()
    sql = "SELECT max(hash(i)) > 0 AS done FROM range(600000000) t(i)"  # ~0.8 s, nothing to skip
    with Datasets(store).stream(sql, dataset) as stream:
        opened = time.perf_counter()
        assert [r.record for r in stream.rows()] == [{"done": True}]
        # opening also made the connection and its views: tens of ms
        assert stream.elapsed_ms >= (opened - started) * 1000 - 200


def test_columns_named_alike_or_rowid_come_back_in_order(store: OffloadStore, dataset: str) -> None:
    """Both fetch paths: the spool's table numbers its columns, so neither a repeated name nor a
    column called rowid (which would hide the row id the spool reads batches by) changes rows."""
    sql = "SELECT i AS a, 10 - i AS a, 7 AS rowid FROM range(5) t(i) ORDER BY i DESC"
    result = query(Datasets(store), sql, dataset_id=dataset)
    assert result.columns == ["a", "a_2", "rowid"]
    assert result.rows == [{"a": i, "a_2": 10 - i, "rowid": 7} for i in range(4, -1, -1)]


def test_a_renamed_column_never_takes_another_columns_name(store: OffloadStore) -> None:
    """Before: the second `a` became `a_2`, the name of the third column, and the row kept one
    value of the two, without a word."""
    result = query(Datasets(store), 'SELECT 1 AS "a", 2 AS "a", 3 AS a_2, 4 AS "a"')
    assert result.columns == ["a", "a_3", "a_2", "a_4"]
    assert result.rows == [{"a": 1, "a_3": 2, "a_2": 3, "a_4": 4}]


def test_columns_that_differ_only_in_case_are_renamed_as_duckdb_compares_names(store: OffloadStore) -> None:
    """DuckDB's names ignore (ASCII) case. Before: `a` and `A` came back as two columns, and a
    page of those rows, queried as a dataset, read `A` as `a` (1 for 2)."""
    result = query(Datasets(store), 'SELECT 1 AS a, 2 AS "A", 3 AS "A_2", 4 AS "ä", 5 AS "Ä"')
    assert result.columns == ["a", "A_3", "A_2", "ä", "Ä"]
    saved = store.write(tool="analyze-with-duckdb", query="q", records=result.rows, page=1, next_cursor=None).id
    assert query(Datasets(store), f"SELECT * FROM dataset_{saved}").rows == result.rows


def test_a_page_whose_keys_clash_is_one_json_column(store: OffloadStore) -> None:
    """Records from elsewhere (a proxied backend's, paged by read-dataset-page) can hold keys
    that differ only in case, or an empty key: such a page is one JSON column, `value`,
    read by JSON Pointer, never `id` read back for `ID`."""
    rows = [{"id": i, "ID": -i, "": "e"} for i in range(3)]
    saved = store.write(tool="read-dataset-page", query="q", records=rows, page=1, next_cursor=None).id
    back = query(Datasets(store), f"SELECT value->>'/ID' AS up, value->>'/' AS empty FROM dataset_{saved}").rows
    assert back == [{"up": str(-i), "empty": "e"} for i in range(3)]


@pytest.mark.parametrize("depth", [65, 300, pytest.param(990, marks=pytest.mark.slow)])
def test_a_value_nested_too_deep_is_refused_with_what_to_do(store: OffloadStore, depth: int) -> None:
    """Before: at 254 levels the MCP SDK's JSON writer gave up (an unmapped error, traceback
    logged), at 990 this module's own recursion did. 64 levels pass; deeper is a query error
    that says to select the value as JSON text. (DuckDB 1.x, the newest on Python 3.10,
    refuses to bind a type 300 deep itself: a query error too, in its own words.) DuckDB takes
    seconds to bind a type 990 deep, over 30 on a loaded machine: the query's time limit is
    raised so that what is asserted is the refusal, not the machine's speed."""
    nested = f"'{'[' * depth}1{']' * depth}'::INTEGER{'[]' * depth}"
    patient = Datasets(store, limits=SqlSettings(timeout_s=600))
    with pytest.raises(SqlExecutionError, match=r"nests deeper than 64 levels.*to_json|Max expression depth"):
        query(patient, f"SELECT {nested} AS v")
    if depth == 65:
        text = query(Datasets(store), f"SELECT to_json({nested})::VARCHAR AS v").rows[0]["v"]
        assert text.replace(" ", "") == "[" * depth + "1" + "]" * depth
    ok = query(Datasets(store), f"SELECT '{'[' * 64}1{']' * 64}'::INTEGER{'[]' * 64} AS v").rows[0]["v"]
    assert json.dumps(ok) == "[" * 64 + "1" + "]" * 64


@pytest.mark.parametrize(
    "sql",
    [
        "WITH t AS (SELECT * FROM dataset) SELECT count(*) AS n FROM t",
        "FROM dataset SELECT count(*) AS n",
        "DESCRIBE dataset",
        "SUMMARIZE dataset",
        "SHOW TABLES",
        "EXPLAIN SELECT * FROM dataset",
        "SELECT 1 AS n UNION ALL SELECT 2",
        "  select count(*) as n from dataset ;  ",
    ],
)
def test_read_only_statement_kinds_are_accepted(store: OffloadStore, dataset: str, sql: str) -> None:
    assert query(Datasets(store), sql, dataset_id=dataset).rows


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("INSERT INTO dataset VALUES (1)", "INSERT"),
        ("CREATE TABLE t AS SELECT 1", "CREATE"),
        ("UPDATE dataset SET type = 'x'", "UPDATE"),
        ("DELETE FROM dataset", "DELETE"),
        ("DROP VIEW dataset", "DROP"),
        ("COPY (SELECT 1) TO '/tmp/codepager-copy.csv'", "COPY"),
        ("ATTACH '/tmp/codepager-attach.db' AS x", "ATTACH"),
        ("DETACH x", "DETACH"),
        ("PRAGMA version", "PRAGMA"),
        ("-- DuckDB 1.x hands this back as a SELECT\n/* */ pragma table_info('dataset')", "PRAGMA"),
        ("-- " * 100_000 + "\nPRAGMA version", "PRAGMA"),  # the comment skipper is linear
        # What DuckDB's scanner skips before the first word, each passed on 1.x as a SELECT:
        ("; PRAGMA version", "PRAGMA"),  # an empty statement
        ("/* comments /* nest */ in DuckDB */ PRAGMA version", "PRAGMA"),
        ("/*" * 64 + "*/" * 64 + " PRAGMA version", "PRAGMA"),
        ("-- a line may end with a carriage return\rPRAGMA version", "PRAGMA"),
        ("\ufeff\u00a0PRAGMA version", "PRAGMA"),  # a byte-order mark and a no-break space
        ("EXPLAIN /* /* */ */ PRAGMA version", "PRAGMA"),
        ("SET threads = 4", "SET"),
        ("RESET threads", "SET"),
        ("LOAD httpfs", "LOAD"),
        ("INSTALL httpfs", "LOAD"),
        ("CALL pragma_version()", "CALL"),
        ("EXPORT DATABASE '/tmp/codepager-export'", "EXPORT"),
        ("CHECKPOINT", "CALL"),
        ("SELECT 1; SELECT 2", "exactly one statement"),
        ("SELECT 1; DROP VIEW dataset", "exactly one statement"),
        ("EXPLAIN ANALYZE COPY (SELECT 1) TO '/tmp/codepager-x.csv'", "COPY"),
        ("SELEKT 1", "does not parse"),
        ("   ", "empty"),
        ("SELECT '\ud800' AS s", "not valid text: surrogates not allowed at character 8"),
        # DuckDB 1.x took 72 s of CPU to parse this (quadratic in the depth), before any timeout
        ("/*" * 50_000 + "*/" * 50_000 + " SELECT 1", "comments nest more than 64 deep"),
    ],
)
def test_other_statements_are_refused(store: OffloadStore, dataset: str, sql: str, message: str) -> None:
    with pytest.raises(SqlRejectedError, match=message):
        query(Datasets(store), sql, dataset_id=dataset)
    assert not Path("/tmp/codepager-copy.csv").exists() and not Path("/tmp/codepager-attach.db").exists()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('/etc/hostname')",
        "SELECT * FROM glob('/etc/*')",
        "SELECT * FROM read_json('https://example.com/x.json')",
        "SELECT * FROM query('SELECT * FROM read_csv(''/etc/passwd'')')",
    ],
)
def test_no_other_file_or_network_access(store: OffloadStore, dataset: str, sql: str) -> None:
    with pytest.raises(SqlExecutionError, match=r"disabled|Permission"):
        query(Datasets(store), sql, dataset_id=dataset)


def test_other_offloaded_files_are_reachable_only_as_views(store: OffloadStore, dataset: str) -> None:
    other = store.write(tool="t", query="q", records=make_records(3))
    ds = Datasets(store)
    with pytest.raises(SqlExecutionError, match=r"disabled|Permission"):
        query(ds, f"SELECT * FROM read_json('{other.path}')", dataset_id=dataset)
    joined = query(ds, f"SELECT count(*) AS n FROM dataset_{other.id} JOIN dataset USING (type)", dataset_id=dataset)
    assert joined.rows == [{"n": 0}]  # regex vs semantic matches: real join, no rows in common


def test_unknown_and_invalid_datasets(store: OffloadStore, dataset: str) -> None:
    ds = Datasets(store)
    with pytest.raises(DatasetNotFoundError, match="run the search again"):
        query(ds, "SELECT * FROM dataset_01ARZ3NDEKTSV4RRFFQ69G5FAV")
    with pytest.raises(InvalidDatasetIdError):
        query(ds, "SELECT 1", dataset_id="../../etc/passwd")
    with pytest.raises(SqlExecutionError, match="no_such_column"):
        query(ds, "SELECT no_such_column FROM dataset", dataset_id=dataset)


def test_values_come_back_as_json(store: OffloadStore) -> None:
    row = query(
        Datasets(store),
        "SELECT 1.50::DECIMAL(10,2) AS d, TIMESTAMPTZ '2024-01-02 03:04:05+00' AS t, DATE '2024-01-02' AS day, "
        "'nan'::DOUBLE AS nan, 'ab'::BLOB AS b, [1, 2] AS l, {'k': 1} AS s, 2::HUGEINT ** 70 AS big, "
        "INTERVAL 90 SECOND AS i, 1 AS dup, 2 AS dup",
    ).rows[0]
    json.dumps(row, allow_nan=False)
    assert row["d"] == 1.5 and row["t"].startswith("2024-01-02") and row["day"] == "2024-01-02"
    assert row["nan"] == "nan" and row["b"] == "6162" and row["l"] == [1, 2] and row["s"] == {"k": 1}
    assert row["i"] == 90.0 and (row["dup"], row["dup_2"]) == (1, 2)


def test_non_object_and_empty_datasets(store: OffloadStore) -> None:
    ds = Datasets(store)
    scalars = store.write(tool="t", query="q", records=["a", "b", 3])
    assert [r["value"] for r in query(ds, "SELECT value FROM dataset", dataset_id=scalars.id).rows] == [
        '"a"',
        '"b"',
        "3",
    ]
    empty = store.write(tool="t", query="q", records=[])
    assert query(ds, "SELECT count(*) AS n FROM dataset", dataset_id=empty.id).rows == [{"n": 0}]


def test_limits_time_and_rows(store: OffloadStore, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SqlTimeoutError, match=r"longer than 0\.3 s"):
        query(
            Datasets(store, limits=SqlSettings(timeout_s=0.3)),
            "SELECT count(*) FROM range(100000000000) a, range(10) b",
        )
    result = query(Datasets(store, limits=SqlSettings(max_rows=1000)), "SELECT range AS i FROM range(5000)")
    assert len(result.rows) == 1000 and result.truncated
    page = result.to_page()
    assert page.counts()["truncated"] and "first 1000 rows" in page.metadata()["warnings"][0]
    monkeypatch.setattr("server.sql.answer.MAX_RESULT_BYTES", 2048)
    wide = query(Datasets(store), "SELECT repeat('x', 100) AS s FROM range(100)")
    line = len(json.dumps({"s": "x" * 100}, separators=(",", ":"))) + 1
    assert len(wide.rows) == 2048 // line and wide.truncated
    assert "cut after 18 rows" in wide.warnings[0] and "reached 2,048 bytes" in wide.warnings[0]


def test_rows_read_past_the_timeout_are_stopped(store: OffloadStore) -> None:
    """Both ways rows arrive stop at the query's timeout: a streamed query is still running, so
    the timer's interrupt stops it, but a spool's reads are statements of their own, and an
    interrupt between them was lost (the rows kept coming)."""
    sql = "SELECT range AS i FROM range(100000)"
    now = [0.0]
    with Datasets(store, limits=SqlSettings(timeout_s=60), clock=lambda: now[0]).stream(sql) as stream:
        rows = stream.rows()
        assert next(rows).record == {"i": 0}
        now[0] = 61.0
        with pytest.raises(SqlTimeoutError, match="longer than 60 s"):
            list(rows)


class CountedConnection:
    """A real DuckDB connection, counted open until closed; its close first waits until every
    query of the test has started and as many connections as may be were open at once, so each
    stays open (its rows fetched and written to the offload file) while every other that can be
    open is."""

    def __init__(self, con: Any, overlap: Overlap) -> None:
        self._con, self._overlap, self._open = con, overlap, True
        overlap.opened()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)

    def close(self) -> None:
        if self._open:
            self._overlap.hold()
            self._open = False
            self._overlap.closed()
        self._con.close()


def test_no_more_queries_than_the_cap_have_a_connection_at_once(
    store: OffloadStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """8 concurrent queries took the server from 593 MB to 3,730 MB (found by an audit): each
    has its own memory limit, and nothing bounded how many ran. With a cap of 2, five queries
    answered the server's way (rows streamed into an offload file while the connection is
    open) never have more than 2 connections open, and each gets its own rows."""
    calls, cap = 5, 2
    overlap = Overlap(calls, cap)
    connect = duckdb.connect

    def counted(*args: Any, **kwargs: Any) -> Any:
        con = connect(*args, **kwargs)
        # the connections queries run on: each thread's parser (`complexity`) has no memory limit, and no data
        return CountedConnection(con, overlap) if "memory_limit" in kwargs.get("config", {}) else con

    monkeypatch.setattr(duckdb, "connect", counted)
    monkeypatch.setattr("server.sql.datasets.MAX_QUERIES", cap)
    ds = Datasets(store, clock=overlap)
    # over the 1 KB answer ceiling of `query`: written to a file while the connection is open
    sql = "SELECT {k} AS k, range AS i, repeat('x', 50) AS pad FROM range(200)"
    results = run_at_once(calls, lambda k: query(ds, sql.format(k=k)).rows)
    assert overlap.most == cap and overlap.now == 0
    assert results == {k: [{"k": k, "i": i, "pad": "x" * 50} for i in range(200)] for k in range(calls)}


def test_a_query_that_waits_out_its_timeout_for_a_slot_fails_saying_the_server_was_busy(
    store: OffloadStore,
) -> None:
    """A query over the cap waits for a slot within its own timeout, then fails with the
    timeout error (never hangs, never dropped), and gives back no slot it did not take."""
    now, step = [0.0], [0.0]

    def clock() -> float:
        now[0] += step[0]
        return now[0]

    ds = Datasets(store, limits=SqlSettings(timeout_s=60), clock=clock)  # MAX_QUERIES: 2
    busy = r"waited 60 s for its turn and was not run: the server was busy with other queries \(it runs 2 at once"
    for _ in range(2):  # the second round: the failed call gave back no slot
        with contextlib.ExitStack() as running:
            for k in range(2):
                running.enter_context(ds.stream(f"SELECT {k} AS k"))
            step[0] = 61.0  # each look at the clock is 61 s later: the waiter's time is up at its first look
            with pytest.raises(SqlTimeoutError, match=busy), ds.stream("SELECT 2 AS k"):
                pass
            step[0] = 0.0
    assert query(ds, "SELECT 2 AS k").rows == [{"k": 2}]


def test_a_row_cap_past_what_duckdb_counts_keeps_every_row(store: OffloadStore) -> None:
    """`sql.max_rows` has no upper bound, so "as many as a BIGINT holds" is a valid cap; the
    spool's LIMIT of cap + 1 rows was past it, and every query failed with a TypeError."""
    unbounded = Datasets(store, limits=SqlSettings(max_rows=(1 << 63) - 1))
    result = query(unbounded, "SELECT range AS i FROM range(3)")
    assert result.rows == [{"i": 0}, {"i": 1}, {"i": 2}] and not result.truncated


def test_a_huge_select_goes_through_the_output_layer_and_is_offloaded(tmp_path: Path, store: OffloadStore) -> None:
    ds = Datasets(store)
    result = query(ds, "SELECT range AS i, repeat('x', 50) AS pad FROM range(20000)")
    layer = make_layer(store.root)
    r = layer.render(result.to_page(), *options(tool="analyze-with-duckdb", query=result.sql, records_key="rows"))
    assert r.mode == "file_ref" and r.structured["results"]["total_count"] == 20000
    assert r.file_ref is not None
    again = query(ds, f"SELECT count(*) AS n, sum(i) AS s FROM dataset_{r.file_ref.id}")
    assert again.rows == [{"n": 20000, "s": sum(range(20000))}]


def test_list_datasets_with_filter(store: OffloadStore, dataset: str) -> None:
    store.write(tool="regex_search", query="TODO", records=make_records(4))
    ds = Datasets(store)
    listed = ds.infos()
    assert [d.tool for d in listed] == ["regex_search", "semantic_search"]  # newest first
    info = ds.infos("PARSE")[0].to_dict()
    assert info == {
        "id": dataset,
        "view": f"dataset_{dataset}",
        "tool": "semantic_search",
        "query": "parse config",
        "created": info["created"],
        "rows": 60,
        "size_bytes": store.path_of(dataset).stat().st_size,
    }
    assert ds.infos("regex")[0].query == "TODO" and ds.infos("nothing-like-this") == []


def test_the_planning_bounds_are_inclusive_and_each_refusal_names_its_bound() -> None:
    """`server.sql.complexity`: a query at each bound passes, one past it is refused."""
    from server.sql.complexity import MAX_JOINED, MAX_QUERY_BLOCKS, MAX_QUERY_BYTES, MAX_RELATIONS

    check = sql_datasets.check_sql
    padded = "SELECT 1 -- " + "x" * (MAX_QUERY_BYTES - len("SELECT 1 -- "))
    assert len(padded.encode()) == MAX_QUERY_BYTES and check(padded)
    with pytest.raises(SqlRejectedError, match=f"{MAX_QUERY_BYTES + 1:,} bytes, over the {MAX_QUERY_BYTES:,}"):
        check(padded + "x")
    union = " UNION ALL ".join(["SELECT 1"] * MAX_QUERY_BLOCKS)
    assert check(union)
    with pytest.raises(SqlRejectedError, match=f"over the {MAX_QUERY_BLOCKS} allowed"):
        check(union + " UNION ALL SELECT 1")
    tables = ", ".join(f"range(1) t{i}" for i in range(MAX_JOINED))
    assert check(f"SELECT 1 FROM {tables}")
    with pytest.raises(SqlRejectedError, match=f"one FROM joins {MAX_JOINED + 1} relations"):
        check(f"SELECT 1 FROM {tables}, range(1) extra")
    with pytest.raises(SqlRejectedError, match="relations"):  # inside EXPLAIN too
        check(f"EXPLAIN SELECT 1 FROM {tables}, range(1) extra")
    # the whole query: FROMs of MAX_JOINED each, a subquery counting once in its outer FROM
    per_from = f"(SELECT 1 FROM {tables})"
    fits = MAX_RELATIONS // (MAX_JOINED + 1)
    assert check(" UNION ALL ".join([f"SELECT 1 FROM {per_from}"] * fits))
    with pytest.raises(SqlRejectedError, match=f"over the {MAX_RELATIONS} allowed"):
        check(" UNION ALL ".join([f"SELECT 1 FROM {per_from}"] * (fits + 1)))
    # 51 scalar subqueries over one table are 51 relations, not 102
    assert check("SELECT " + ", ".join(["(SELECT 1 FROM range(1))"] * 51))


@pytest.mark.parametrize(
    ("sql", "refused"),
    [
        ("WITH a AS NOT MATERIALIZED (SELECT 1) SELECT * FROM a", True),
        ("WITH a AS NOT /* a comment */ materialized (SELECT 1) SELECT * FROM a", True),
        ("EXPLAIN WITH a AS NOT MATERIALIZED (SELECT 1) SELECT * FROM a", True),
        ("WITH a AS MATERIALIZED (SELECT 1) SELECT * FROM a", False),
        ("SELECT 'not materialized' AS s WHERE NOT false", False),
        ("SELECT 1 AS materialized WHERE NOT false", False),
    ],
)
def test_ctes_may_not_be_forced_inline(sql: str, refused: bool) -> None:
    """NOT MATERIALIZED lets a 1 KB chain of CTEs, each joining the last twice, become 2^20
    relations in the plan (found by a review: 16 s under a 2 s timeout, 1.9 GB). DuckDB 1.x's
    parse tree does not show it, so the words are found as keyword tokens."""
    if refused:
        with pytest.raises(SqlRejectedError, match="NOT MATERIALIZED is not allowed"):
            sql_datasets.check_sql(sql)
    else:
        assert sql_datasets.check_sql(sql)
