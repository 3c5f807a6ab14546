"""The proxy's saving path without a network: records read out of real tool results, profiles
(unions for mixed types, distinct values), the dated dataset store (layout, metadata, atomic
files, retention that touches only its own files), SQL and listing over both kinds of dataset,
and the answer's example SQL run for real."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fastmcp.tools.base import ToolResult
from mcp_types import ImageContent, TextContent
from ulid import ULID

from harness.proxy_backend import make_rows
from harness.results import structured_of, text_of
from server.errors import DatasetNotFoundError
from server.output import CHARS_PER_TOKEN, OffloadStore, estimate_tokens
from server.proxy.answer import answer_budget, example_sql
from server.proxy.backends import ToolOwners, command_backend, server_name
from server.proxy.dataset_store import DatasetStore
from server.proxy.extraction import MAX_NESTING, Extracted, as_object, extract_records
from server.proxy.profile import MAX_DISTINCT, profile_records
from server.proxy.saver import ProxiedCall, ResultSaver
from server.proxy.size import Size, sent_size
from server.sql import DatasetFilter, Datasets
from tests.output_helpers import query
from tests.proxy_helpers import stdio_transport


def size_of(text: str) -> Size:
    """The size the interceptor hands the saver for a text result."""
    return Size(len(text.encode()), estimate_tokens(text))


def text_result(text: str, structured: dict[str, Any] | None = None) -> ToolResult:
    return ToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def extracted(result: ToolResult) -> Extracted:
    """The records of a result that holds some."""
    found = extract_records(result)
    assert found is not None, "the result holds no records"
    return found


def objects(records) -> list[Any]:
    return [as_object(r) for r in records]


# -- extraction --------------------------------------------------------------------------------


def test_a_json_array_in_text_is_one_record_per_element() -> None:
    rows = make_rows(5)
    found = extract_records(text_result(json.dumps(rows, indent=2)))
    assert found is not None and objects(found.records) == rows
    assert all(b"\n" not in bytes(r) for r in found.records)  # compacted: each record is one JSONL line
    assert (found.format, found.records_from, found.envelope) == ("json_records", "text", None)


def test_records_nested_one_and_two_levels_keep_their_envelope() -> None:
    rows = make_rows(4)
    one = extract_records(text_result(json.dumps({"total": 4, "tags": ["a"], "rows": rows})))
    assert one is not None and objects(one.records) == rows and one.records_from == "text:rows"
    assert one.envelope == {"total": 4, "tags": ["a"], "rows": "<4 records: saved in the dataset>"}
    page = {"results": {"matches": rows, "count": 4}, "pagination": {"next_cursor": "abc"}}
    two = extract_records(text_result("ignored", structured=page))
    assert two is not None and objects(two.records) == rows and two.records_from == "structuredContent:results.matches"
    assert two.envelope is not None and two.envelope["pagination"] == {"next_cursor": "abc"}


@pytest.mark.parametrize("text", [' [{"a": 0}, {"a": 1}]', '\n\t{"rows": [{"a": 0}, {"a": 1}]}\r\n '])
def test_json_surrounded_by_whitespace_is_still_records(text: str) -> None:
    found = extract_records(text_result(text))
    assert found is not None and found.format == "json_records" and objects(found.records) == [{"a": 0}, {"a": 1}]


def test_structured_content_wins_and_scalars_become_value_records() -> None:
    found = extract_records(text_result("[1, 2]", structured={"result": [3, "x", None]}))
    assert found is not None and found.records == [{"value": 3}, {"value": "x"}, {"value": None}]
    assert found.records_from == "structuredContent:result"
    raw = extract_records(text_result('[3, "x", {"a": 1}, [1]]'))
    assert raw is not None and objects(raw.records) == [{"value": 3}, {"value": "x"}, {"a": 1}, {"value": [1]}]


def test_anything_else_is_text_lines_and_non_text_results_are_their_blocks() -> None:
    found = extract_records(text_result("first\nsecond line\n", structured={"content": "first\nsecond line\n"}))
    assert found is not None and found.format == "text_lines"
    assert found.records == [{"line": 1, "text": "first"}, {"line": 2, "text": "second line"}]
    not_records = extract_records(text_result('{"a": {"b": {"c": [1, 2]}}}'))  # three levels down: too deep
    assert not_records is not None and not_records.format == "text_lines"
    image = ToolResult(
        content=[ImageContent(type="image", data="aGk=", mime_type="image/png")], structured_content={"n": 1}
    )
    blocks = extract_records(image)
    assert blocks.records == [{"block": 0, "type": "image", "data": "aGk=", "mimeType": "image/png"}]
    assert blocks.records_from == "content" and blocks.envelope == {"structuredContent": {"n": 1}}


def nested_array(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (f'[{{"a": {nested_array(MAX_NESTING - 2)}}}]', "json_records"),  # the array, the record, then the rest
        (f'[{{"a": {nested_array(MAX_NESTING - 1)}}}]', "text_lines"),
        ('[{"a": "' + "[{" * 5000 + '"}, {"a": "\\"]]]"}]', "json_records"),  # brackets in strings do not count
        (nested_array(5000), "text_lines"),
        ('{"rows": [' + nested_array(5000, "{}") + "]}", "text_lines"),
    ],
)
def test_json_nested_past_the_limit_is_kept_as_text_lines(text: str, kind: str) -> None:
    found = extract_records(text_result(text))
    assert found is not None and found.format == kind
    if kind == "text_lines":
        assert "\n".join(r["text"] for r in found.records) == text  # all of it, unchanged


def test_structured_content_nested_past_the_limit_is_not_split() -> None:
    deep = {"items": [{"a": json.loads(nested_array(MAX_NESTING))}]}
    found = extract_records(text_result('[{"b": 1}]', structured=deep))
    assert found is not None and found.records_from == "text" and objects(found.records) == [{"b": 1}]


# -- profiles ----------------------------------------------------------------------------------


def test_profile_reports_unions_optional_fields_and_distinct_values() -> None:
    rows = make_rows(300, mixed=True)
    for r in rows[::50]:
        del r["note"]
    profile = profile_records(rows, sample_size=100)
    assert profile.fields == {"id": "integer", "kind": "string", "value": "integer | string", "note": "string"}
    assert profile.optional == ["note"]
    assert profile.distinct_values == {
        "kind": [{"value": "alpha", "count": 100}, {"value": "beta", "count": 100}, {"value": "gamma", "count": 100}]
    }
    assert profile.sample_size == 100 and len(profile.sample_records) == 3


@pytest.mark.parametrize("raw", [False, True], ids=["objects", "raw-json"])
def test_distinct_values_are_counted_over_every_record_not_just_the_sample(raw: bool) -> None:
    rows = [{"status": "ok", "n": i} for i in range(1000)]
    rows[501]["status"] = "rare"  # most likely not in a sample of 10: counted anyway
    records = extracted(text_result(json.dumps(rows))).records if raw else rows
    profile = profile_records(records, sample_size=10)
    assert profile.distinct_values["status"] == [{"value": "ok", "count": 999}, {"value": "rare", "count": 1}]
    assert profile.fields == {"status": "string", "n": "integer"} and profile.sample_records == rows[:3]


def test_high_cardinality_long_and_nested_fields_are_not_categories() -> None:
    rows = [
        {"id": i, "name": f"n{i % (MAX_DISTINCT + 5)}", "blob": "x" * 500, "tags": ["a"], "flag": i % 2 == 0}
        for i in range(200)
    ]
    profile = profile_records(rows, sample_size=100)
    assert set(profile.distinct_values) == {"flag"}
    assert profile.fields["tags"] == "array" and profile.fields["flag"] == "boolean"


# -- the dataset store -------------------------------------------------------------------------


def old_id(days: float) -> str:
    return str(ULID.from_timestamp(time.time() - days * 86400))


def test_layout_metadata_and_atomic_files(tmp_path: Path) -> None:
    store = DatasetStore(tmp_path / "data")
    dataset_id = store.new_id()
    rows = make_rows(7)
    saved = store.save(dataset_id, rows, {"tool": "t", "server": "s", "arguments": {"n": 7}})
    day = ULID.from_str(dataset_id).datetime
    folder = tmp_path / "data" / "datasets" / f"{day:%Y}" / f"{day:%m}" / f"{day:%d}"
    assert saved.data_path == folder / f"dataset_{dataset_id}_data.jsonl"
    assert saved.metadata_path == folder / f"dataset_{dataset_id}_metadata.json"
    assert [json.loads(line) for line in saved.data_path.read_text().splitlines()] == rows
    meta = json.loads(saved.metadata_path.read_text())
    assert meta["id"] == dataset_id and meta["timestamp"].startswith(f"{day:%Y-%m-%d}") and meta["record_count"] == 7
    assert meta["tool"] == "t" and meta["size_bytes"] == saved.data_path.stat().st_size
    assert {p.name for p in folder.iterdir()} == {saved.data_path.name, saved.metadata_path.name}  # no temp files
    assert oct(saved.data_path.stat().st_mode & 0o777) == "0o600" and oct(folder.stat().st_mode & 0o777) == "0o700"
    assert store.open(dataset_id).read(2, 3) == rows[2:5]


def test_a_metadata_file_that_is_not_a_json_object_reads_as_not_found(tmp_path: Path) -> None:
    store = DatasetStore(tmp_path / "data")
    dataset_id = store.new_id()
    saved = store.save(dataset_id, make_rows(2), {"tool": "t", "server": "s"})
    saved.metadata_path.write_text("[1, 2]")  # valid JSON, but no metadata object
    with pytest.raises(DatasetNotFoundError, match="call the tool again to recreate it"):
        store.open(dataset_id)


def test_concurrent_saves_get_unique_complete_datasets(tmp_path: Path) -> None:
    store = DatasetStore(tmp_path / "data")
    rows = make_rows(2000)
    ids: list[str] = []

    def save() -> None:
        dataset_id = store.new_id()
        store.save(dataset_id, rows, {"tool": "t", "server": "s"})
        ids.append(dataset_id)

    threads = [threading.Thread(target=save) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 8
    for dataset_id in ids:
        assert store.open(dataset_id).read(0, 5000) == rows


def test_a_failed_write_raises_a_typed_error_and_leaves_nothing(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the data dir should be")
    from server.errors import StoreWriteError

    with pytest.raises(StoreWriteError, match=r"not a directory|Not a directory"):
        DatasetStore(blocker).save(DatasetStore.new_id(), [{"a": 1}], {})


def test_retention_removes_only_old_datasets_of_ours_and_empty_day_folders(tmp_path: Path) -> None:
    store = DatasetStore(tmp_path / "data", retention_days=30)
    old, fresh = old_id(45), store.new_id()
    for dataset_id in (old, fresh):
        store.save(dataset_id, [{"a": 1}], {"tool": "t", "server": "s"})
    old_folder = store.day_dir(old)
    foreign = old_folder / "notes.txt"
    foreign.write_text("not ours")
    lookalike = store.day_dir(fresh) / f"dataset_{old}_data.jsonl.bak"
    lookalike.write_text("not ours either")
    report = store.cleanup()
    assert report.removed_count == 2 and report.freed_bytes > 0
    assert foreign.exists() and lookalike.exists() and store.open(fresh).count == 1
    foreign.unlink()
    assert store.cleanup(0).removed_count == 2  # everything of ours, now
    assert not old_folder.exists() and lookalike.exists()


# -- SQL and listing over both sources ------------------------------------------------------------


@pytest.fixture
def both(tmp_path: Path) -> tuple[Datasets, OffloadStore, DatasetStore]:
    offload, saved = OffloadStore(tmp_path / "offload"), DatasetStore(tmp_path / "data")
    return Datasets(offload, saved), offload, saved


def test_sql_joins_an_offloaded_page_with_a_saved_result(both) -> None:
    datasets, offload, saved = both
    page = offload.write(tool="regex_search", query="q", records=[{"kind": "alpha", "n": 1}, {"kind": "beta", "n": 2}])
    result_id = saved.new_id()
    saved.save(result_id, make_rows(30), {"tool": "records", "server": "backend"})
    sql = (
        f"SELECT p.n, count(*) AS c FROM dataset_{page.id} p JOIN dataset_{result_id} r USING (kind) "
        "GROUP BY 1 ORDER BY 1"
    )
    assert query(datasets, sql).rows == [{"n": 1, "c": 10}, {"n": 2, "c": 10}]
    assert query(datasets, "SELECT count(*) AS c FROM dataset", dataset_id=result_id).rows == [{"c": 30}]


def test_listing_filters_by_text_tool_server_and_date(both) -> None:
    datasets, offload, saved = both
    offload.write(tool="regex_search", query="needle", records=[{"a": 1}])
    time.sleep(0.002)  # ids order by creation time to the millisecond
    old, new = old_id(3), saved.new_id()
    saved.save(old, [{"a": 1}], {"tool": "directory_tree", "server": "fs", "arguments": {"path": "/src"}})
    saved.save(new, [{"a": 1}], {"tool": "query", "server": "db", "arguments": {"sql": "select"}})
    assert [i.tool for i in datasets.infos()] == ["query", "regex_search", "directory_tree"]  # newest first
    assert [i.id for i in datasets.infos(DatasetFilter(server="fs"))] == [old]
    assert [i.id for i in datasets.infos(DatasetFilter(tool="query"))] == [new]
    assert [i.id for i in datasets.infos("/src")] == [old]
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert {i.tool for i in datasets.infos(DatasetFilter(date_from=today))} == {"regex_search", "query"}
    assert [i.id for i in datasets.infos(DatasetFilter(date_to=old_id_day(old)))] == [old]
    assert datasets.infos(DatasetFilter(date_from="2001-01-01T00:00:00Z", date_to="2001-12-31")) == []
    # UTC written with Z, as the validator's own example and the stored timestamps do (Python
    # 3.10's fromisoformat refuses it, and every dataset fell outside every date filter there)
    assert {i.tool for i in datasets.infos(DatasetFilter(date_from=f"{today}T00:00:00Z"))} == {"regex_search", "query"}
    info = next(i for i in datasets.infos() if i.id == old).to_dict()
    assert info["server"] == "fs" and json.loads(info["query"]) == {"path": "/src"}
    with pytest.raises(ValueError, match="ISO date"):
        DatasetFilter(date_from="last tuesday")


def old_id_day(dataset_id: str) -> str:
    return f"{ULID.from_str(dataset_id).datetime:%Y-%m-%d}"


@pytest.mark.parametrize(
    "records", [make_rows(300, mixed=True), [{"line": i, "text": f"INFO start {i}"} for i in range(1, 50)]]
)
def test_every_example_query_runs(both, records) -> None:
    datasets, _, saved = both
    result = text_result(json.dumps(records) if "id" in records[0] else "\n".join(r["text"] for r in records))
    extracted = extract_records(result)
    assert extracted is not None
    profile = profile_records(extracted.records, sample_size=100)
    dataset_id = saved.new_id()
    saved.save(dataset_id, extracted.records, {"tool": "t", "server": "s"})
    queries = example_sql(f"dataset_{dataset_id}", extracted, profile)
    assert len(queries) >= 3
    for sql in queries:
        assert query(datasets, sql).rows, sql


# -- the saver never fails the call -------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "\n".join(f"line {i} " + "z" * 50 for i in range(2000)),
        json.dumps([f'say "hi" to C:\\dir{i}\\' for i in range(3000)]),  # every character escapes again
    ],
    ids=["plain-text", "json-full-of-quotes-and-backslashes"],
)
def test_an_unwritable_data_dir_gives_a_truncated_inline_answer_within_the_threshold(tmp_path: Path, text: str) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    saver = ResultSaver(DatasetStore(blocker / "data"), threshold_tokens=1000, schema_sample_size=100)
    result = text_result(text)
    extracted = extract_records(result)
    assert extracted is not None
    answer = saver.save(result, extracted, ProxiedCall("read_file", "fs", {"path": "/x"}, size_of(text)))
    body = answer.structured_content
    assert answer.is_error is False and body is not None and json.loads(text_of(answer.content[0])) == body
    assert body["intercepted"] == "truncated" and "could not be saved" in body["warning"]
    assert text.startswith(body["text"]) and f"first {len(body['text']):,} of" in body["warning"]
    # the whole answer, sent as text and as structuredContent, escaping included, is under the threshold
    assert sent_size(answer).tokens <= 1000
    assert len(body["text"]) > 1000 * CHARS_PER_TOKEN // 6  # and not cut much further than that needs


def wide_rows(columns: int, rows: int) -> list[dict[str, str]]:
    return [{f"col_{k:04d}": f"value {i} {k}" for k in range(columns)} for i in range(rows)]


@pytest.mark.parametrize(("columns", "rows"), [(300, 200), (1500, 20)])
def test_the_answer_for_wide_records_fits_its_budget_and_says_where_the_other_fields_are(
    both, columns: int, rows: int
) -> None:
    datasets, _, saved = both
    text = json.dumps(wide_rows(columns, rows))
    result = text_result(text)
    saver = ResultSaver(saved, threshold_tokens=8192, schema_sample_size=100)
    answer = saver.save(result, extracted(result), ProxiedCall("query", "db", {}, size_of(text)))
    body = answer.structured_content
    assert body is not None and json.loads(text_of(answer.content[0])) == body
    assert sent_size(answer).tokens <= answer_budget(8192) <= 8192 // 2
    ds = body["dataset"]
    assert ds["record_count"] == rows and ds["table"] == f"dataset_{ds['id']}" and body["example_sql"]
    listed = list(ds["fields"])
    assert 10 < len(listed) < columns and listed == [f"col_{k:04d}" for k in range(len(listed))]  # the first ones
    assert (
        ds["more_fields"].startswith(f"and {columns - len(listed):,} more fields") and "DESCRIBE" in ds["more_fields"]
    )
    assert all(list(r) == listed for r in ds["sample_records"])
    assert set(ds["distinct_values"]) <= set(listed)
    for sql in body["example_sql"]:
        assert query(datasets, sql).rows, sql
    assert len(query(datasets, f"DESCRIBE {ds['table']}").rows) == columns  # where the rest are
    meta = json.loads(Path(ds["metadata_path"]).read_text())
    assert len(meta["schema"]["fields"]) == columns


def test_narrow_records_are_described_in_full(both) -> None:
    _, _, saved = both
    text = json.dumps(make_rows(3000, mixed=True))
    result = text_result(text)
    answer = ResultSaver(saved, threshold_tokens=8192, schema_sample_size=100).save(
        result, extracted(result), ProxiedCall("records", "tiny", {}, size_of(text))
    )
    ds = structured_of(answer.structured_content)["dataset"]
    assert list(ds["fields"]) == ["id", "kind", "value", "note"] and "more_fields" not in ds
    assert ds["sample_records"] == make_rows(3, mixed=True) and set(ds["distinct_values"]) == {"kind"}


def test_a_tiny_threshold_still_gets_the_floor_answer(both) -> None:
    _, _, saved = both
    text = json.dumps({"page": {f"k{i}": i for i in range(2000)}, "rows": wide_rows(50, 100)})
    result = text_result(text)
    answer = ResultSaver(saved, threshold_tokens=10, schema_sample_size=100).save(
        result, extracted(result), ProxiedCall("query", "db", {}, size_of(text))
    )
    body = structured_of(answer.structured_content)
    assert body["intercepted"] == "saved_as_dataset" and sent_size(answer).bytes < 2500
    assert {"id", "table", "record_count", "data_path", "metadata_path"} <= set(body["dataset"])
    assert body["example_sql"] == [
        f"SELECT * FROM {body['dataset']['table']} LIMIT 20",
        f"DESCRIBE {body['dataset']['table']}",
    ]


def test_an_envelope_too_wide_to_shrink_is_replaced_by_a_note(both) -> None:
    _, _, saved = both
    text = json.dumps({"page": {f"k{i}": i for i in range(2000)}, "rows": make_rows(3000)})
    result = text_result(text)
    answer = ResultSaver(saved, threshold_tokens=8192, schema_sample_size=100).save(
        result, extracted(result), ProxiedCall("query", "db", {}, size_of(text))
    )
    ds = structured_of(answer.structured_content)["dataset"]
    assert ds["envelope"].startswith("<too large to show") and list(ds["fields"]) == ["id", "kind", "value", "note"]
    assert sent_size(answer).tokens <= answer_budget(8192)


# -- backends ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "name"),
    [
        (["npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"], "server-filesystem"),
        (["npx", "@scope/server-x@1.2.3"], "server-x"),
        (["python", "-m", "mcp_server_time"], "mcp_server_time"),
        (["/usr/bin/python3", "tests/proxy_backend.py"], "proxy_backend"),
        (["uvx", "mcp-server-git", "--repository", "."], "mcp-server-git"),
        (["docker", "run", "-i", "--rm", "mcp/fetch"], "fetch"),
        (["/opt/bin/codepager", "serve"], "codepager"),
    ],
)
def test_server_names_from_commands(command: list[str], name: str) -> None:
    assert server_name(command[0], command[1:]) == name


def test_tool_owners_single_and_namespaced() -> None:
    one = ToolOwners([command_backend([sys.executable], name="fs")])
    assert one.owner("read_file") == ("fs", "read_file")
    many = ToolOwners(
        [command_backend([sys.executable], name="git"), command_backend([sys.executable], name="git_hub")]
    )
    assert many.owner("git_hub_search") == ("git_hub", "search")
    assert many.owner("git_log") == ("git", "log")
    assert many.owner("analyze-with-duckdb") is None


def test_a_command_backend_inherits_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("CODEPAGER_TEST_TOKEN", "secret")
    transport = stdio_transport(command_backend([sys.executable, "--flag"]))
    assert transport.env is not None and transport.env["CODEPAGER_TEST_TOKEN"] == "secret"
    assert (transport.command, transport.args) == (sys.executable, ["--flag"])
    with pytest.raises(ValueError, match="not found"):
        command_backend(["no-such-mcp-server-anywhere"])


def test_dataset_pages_walk_offloaded_pages_too(both) -> None:
    from server.tools.dataset_pages import dataset_page
    from sessions import CursorCodec
    from sessions.cursor import CursorState
    from sessions.errors import CursorMalformedError

    datasets, offload, _ = both
    records = make_rows(25)
    page_id = offload.write(tool="regex_search", query="q", records=records).id
    codec = CursorCodec("a-test-key-of-some-length")
    seen, cursor = [], None
    while True:
        page = dataset_page(datasets, codec, page_id, cursor, 10)
        seen += page.records()
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == records  # the header line is not a record
    search_cursor = codec.encode(CursorState("session", 0, 10))  # a search's cursor
    with pytest.raises(CursorMalformedError, match="pages a search"):
        dataset_page(datasets, codec, page_id, search_cursor, 10)
