"""Record keys SQL cannot tell apart (`id` beside `ID`, the empty key, `Type` beside a page
header's `type`) and keys the key check's fast path cannot hold: what the proxy's answer and
the SQL views do with them. Found by a review of the change that handled clashing keys; each
test failed on it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from fastmcp.tools.base import ToolResult
from mcp_types import TextContent

from harness.results import structured_of
from server.errors import SqlExecutionError
from server.output import OffloadStore, estimate_tokens
from server.output.descriptor import build_file_ref
from server.proxy.answer import answer_budget
from server.proxy.dataset_store import DatasetStore
from server.proxy.extraction import extract_records
from server.proxy.profile import _KEYS, _every_key
from server.proxy.saver import ProxiedCall, ResultSaver
from server.proxy.size import Size, sent_size
from server.sql import Datasets
from tests.output_helpers import query


@pytest.fixture
def both(tmp_path: Path) -> tuple[Datasets, OffloadStore, DatasetStore]:
    offload, saved = OffloadStore(tmp_path / "offload"), DatasetStore(tmp_path / "data")
    return Datasets(offload, saved), offload, saved


def save(saved: DatasetStore, rows: list[dict[str, Any]], threshold: int = 8192) -> ToolResult:
    text = json.dumps(rows)
    result = ToolResult(content=[TextContent(type="text", text=text)])
    found = extract_records(result)
    assert found is not None
    size = Size(len(text.encode()), estimate_tokens(text))
    return ResultSaver(saved, threshold_tokens=threshold, schema_sample_size=100).save(
        result, found, ProxiedCall("t", "s", {}, size)
    )


def test_every_example_query_runs_when_the_empty_key_is_categorical(both) -> None:
    """The empty key, first in its records and categorical, is among the first two
    distinct-value fields. Before: its example query was `SELECT value->>'/' AS "", ...`,
    which DuckDB refuses (a zero-length delimited identifier)."""
    datasets, _, saved = both
    answer = save(saved, [{"": i % 2, "id": i % 3, "ID": "x", "pad": "p" * 40} for i in range(2000)])
    body = structured_of(answer.structured_content)
    assert body["intercepted"] == "saved_as_dataset"
    for sql in body["example_sql"]:
        query(datasets, sql)  # raises SqlRejectedError for the empty key's query


def test_the_clash_note_keeps_the_answer_within_its_budget(both) -> None:
    """Keys are the backend's, of any length. Before: the note named 5 of them whole and
    repeated the first twice in its example, in every answer including the floor one, so two
    50,000-char keys that differ only in case made the 'compact' answer ~100,000 tokens."""
    _, _, saved = both
    long_key = "k" * 50_000
    answer = save(saved, [{long_key: i, long_key.upper(): i, "pad": "p" * 40} for i in range(200)])
    body = structured_of(answer.structured_content)
    assert body["intercepted"] == "saved_as_dataset"
    assert sent_size(answer).tokens <= answer_budget(8192), sent_size(answer)
    assert "cannot each be an SQL column" in body["dataset"]["sql_columns"]


@pytest.mark.parametrize("key", ["Type", "Count", "Query", "Page"])
def test_a_page_whose_keys_differ_from_the_headers_only_in_case_reads_its_own_values(both, key: str) -> None:
    """An offloaded page's view reads the file with its header line, whose keys (type, tool,
    query, count, page, ...) become columns too. Before: a record key that differs from one of
    them only in case (`SELECT kind AS Type, count(*) AS Count` saved as a page) was renamed by
    DuckDB, and the view's `"Type"` read the header's `type`: NULL for every record. Now such
    a page is one JSON column, `value`, whose keys read their own values."""
    datasets, offload, _ = both
    rows = [{key: i, "n": 1} for i in range(3)]
    page = offload.write(tool="analyze-with-duckdb", query="q", records=rows, page=1, next_cursor=None)
    back = query(datasets, f"SELECT (value->>'/{key}')::INTEGER AS v FROM dataset_{page.id}").rows
    assert back == [{"v": i} for i in range(3)]
    assert [json.loads(r["value"]) for r in query(datasets, f"SELECT * FROM dataset_{page.id}").rows] == rows


def test_every_key_is_found_past_the_struct_bounds() -> None:
    """Past 32 keys the check decodes records as dicts (a 256-field struct made every field of
    every record: 2.5x slower than dicts); the keys found are the same either way, the last
    record's `KEY_0` included."""
    wide = msgspec.Raw(("{" + ",".join(f'"key_{i}":1' for i in range(256)) + "}").encode())
    records = [wide] + [msgspec.Raw(b'{"key_0":1}')] * 1000 + [msgspec.Raw(b'{"KEY_0":1}')]
    plain: dict[str, None] = {}
    for record in records:
        plain.update(dict.fromkeys(_KEYS.decode(record)))
    assert list(_every_key(records, [])) == list(plain) and "KEY_0" in plain


def test_a_key_msgspec_cannot_name_a_field_goes_the_dict_way() -> None:
    """A lone surrogate (which a dict record from structured content can hold) is refused by
    msgspec as a field name for a reason of its own: the check falls back, it does not fail."""
    records = [{"lone \ud800": 1, "id": 2}, {"ID": 3}]
    assert list(_every_key(records, ["lone \ud800", "id"])) == ["lone \ud800", "id", "ID"]


@pytest.mark.parametrize("key", ['say "hi"', "C:\\Users\\me", "tab\there", "line\nbreak"])
def test_a_key_holding_a_quote_backslash_or_control_character_is_still_saved(both, key: str) -> None:
    """The key check decodes records into a struct whose fields are the keys seen; msgspec
    refuses a field name holding '"', '\\' or a control character (ValueError). Before: the
    saver caught it and answered the result truncated ("internal error: ValueError") instead
    of saved. Such keys now go the dict way."""
    datasets, _, saved = both
    answer = save(saved, [{key: i, "n": i % 3, "pad": "p" * 40} for i in range(2000)])
    body = structured_of(answer.structured_content)
    assert body["intercepted"] == "saved_as_dataset", body.get("warning")
    assert query(datasets, f"SELECT count(*) AS n FROM {body['dataset']['table']}").rows == [{"n": 2000}]


@pytest.mark.parametrize(
    ("rows", "named"),
    [
        ([{"Type": i, "n": 1} for i in range(3)], '"Type"'),  # beside the header's `type`
        ([{"id": i, "ID": -i} for i in range(3)], '"id", "ID"'),
    ],
    ids=["header-case", "id-ID"],
)
def test_a_page_sql_reads_as_one_json_column_says_so_in_its_file_ref(both, rows, named: str) -> None:
    """A page whose keys cannot each be a column is one JSON column, `value`, in SQL (the test
    above). Before: its file_ref listed the keys as fields and pointed to the SQL view, so an
    agent's `SELECT "Type" ...` failed; the guidance now says how that view reads, naming the
    keys, and the JSON Pointer it shows reads each record's own value."""
    datasets, offload, _ = both
    page = offload.write(tool="analyze-with-duckdb", query="q", records=rows, page=1, next_cursor=None)
    guidance = build_file_ref(page, rows, has_more=False, retention_hours=24).guidance
    assert "one JSON column, value" in guidance and f"the keys {named} cannot each be a column" in guidance
    assert "value->>'/KEY'" in guidance, guidance
    key = next(iter(rows[0]))
    back = query(datasets, f"SELECT (value->>'/{key}')::INTEGER AS v FROM dataset_{page.id}").rows
    assert back == [{"v": row[key]} for row in rows]
    plain = offload.write(tool="analyze-with-duckdb", query="q", records=[{"n": 1}], page=1, next_cursor=None)
    assert "JSON column" not in build_file_ref(plain, [{"n": 1}], has_more=False, retention_hours=24).guidance


def test_a_record_repeating_a_key_fails_only_the_queries_reading_it_and_says_what_to_do(both) -> None:
    """JSON allows a key twice in one object (`{"a": 1, "a": 2}`), and a backend's text is
    saved as it came. DuckDB refuses to make such a record a row, so a query reading that
    key's column fails. Before: the error was DuckDB's, telling the agent to set read_json
    options it cannot reach; now it says what happened and what still works."""
    datasets, _, saved = both
    rows = ",".join(f'{{"id": {i}, "status": "ok", "note": "{"n" * 40}"}}' for i in range(400))
    text = f'[{rows}, {{"id": 400, "status": "ok", "status": "late", "note": "dup"}}]'
    result = ToolResult(content=[TextContent(type="text", text=text)])
    found = extract_records(result)
    assert found is not None
    size = Size(len(text.encode()), estimate_tokens(text))
    answer = ResultSaver(saved, threshold_tokens=1024, schema_sample_size=100).save(
        result, found, ProxiedCall("t", "s", {}, size)
    )
    table = structured_of(answer.structured_content)["dataset"]["table"]
    assert query(datasets, f"SELECT count(*) AS n, max(id) AS top FROM {table}").rows == [{"n": 401, "top": 400}]
    with pytest.raises(SqlExecutionError) as failed:
        query(datasets, f"SELECT status FROM {table}")
    message = str(failed.value)
    assert 'has duplicate key "status"' in message
    assert "repeats a key" in message and "read-dataset-page" in message
    assert "ignore_errors" not in message  # DuckDB's advice is about options the agent cannot set


def test_a_duckdb_error_echoing_a_huge_literal_is_clipped(both) -> None:
    """DuckDB's messages quote the SQL: a 60 KB literal that fails to cast came back whole, as
    an error result, which no output budget covers."""
    datasets, _, _ = both
    with pytest.raises(SqlExecutionError) as failed:
        query(datasets, f"SELECT '{'z' * 60_000}'::INTEGER AS n")
    message = str(failed.value)
    assert "Could not convert string" in message
    assert len(message) < 2_200, len(message)
