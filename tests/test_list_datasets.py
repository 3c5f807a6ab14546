"""The dataset a search's file_ref answer names holds the search's whole result list, not just
the offloaded page: SQL and the jq recipes over it see every match the session holds, within
the SQL result caps (`sql.max_rows`, `sql.max_result_bytes`), and the
descriptor says how many rows it has and how that relates to `total_count`.

Before (issue 37.2): the dataset was the page file, at most 200 rows, so `SELECT ... WHERE path
LIKE 'pkg/%'` over page 1 of a 240-match search missed every match past the page."""

from __future__ import annotations

import json
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

from fastmcp import Client

from server.app import build_app
from server.output import OffloadStore
from server.output.list_dataset import ListDatasets, WholeList
from tests.code_tree import write_code_tree
from tests.jq_recipes import run_recipe
from tests.server_helpers import make_settings, structured

#: `write_code_tree`'s defaults: 12 files (lib/ the even ones, pkg/ the odd) of 20 needles each.
TOTAL = 240


async def sql(c: Client[Any], query: str, dataset_id: str) -> list[dict[str, Any]]:
    answer = structured(await c.call_tool("analyze-with-duckdb", {"query": query, "dataset_id": dataset_id}))
    rows: list[dict[str, Any]] = answer["results"]["rows"]
    return rows


async def test_sql_and_jq_over_an_offloaded_page_see_the_whole_result_list(code_tree, tmp_path):
    async with Client(build_app(make_settings(code_tree, tmp_path))) as c:
        args = {"pattern": "needle", "page_size": 50, "output_mode": "file_ref"}
        page = structured(await c.call_tool("regex_search", args))
        ref = page["results"]["file_ref"]
        assert page["results"]["count"] == 50 and page["results"]["total_count"] == TOTAL
        dataset = ref["dataset"]
        assert dataset["rows"] == dataset["total_count"] == TOTAL and dataset["id"] != ref["id"]
        assert dataset["view"] == f"dataset_{dataset['id']}" and "every match" in dataset["note"]
        assert f"dataset_id={dataset['id']}" in ref["guidance"]

        # Page 1 holds lib/mod00, pkg/mod01 and half of lib/mod02: the page alone has 20 pkg rows.
        pkg = await sql(c, "SELECT path, line FROM dataset WHERE path LIKE 'pkg/%'", dataset["id"])
        assert len(pkg) == TOTAL // 2
        counts = await sql(c, "SELECT count(*) AS n, count(DISTINCT path) AS files FROM dataset", dataset["id"])
        assert counts == [{"n": TOTAL, "files": 12}]

        # The jq recipes read the whole list too, and each record has the page's shape.
        per_file = next(r for r in ref["jq_recipes"] if r["description"].startswith("Count matches per file"))
        rows = [json.loads(line) for line in run_recipe(per_file["command"]).splitlines()]
        assert sum(row["count"] for row in rows) == TOTAL and len(rows) == 12
        lines = Path(dataset["path"]).read_text().splitlines()
        page_lines = Path(ref["path"]).read_text().splitlines()
        assert lines[1:51] == page_lines[1:] and len(lines) == TOTAL + 1

        # Page 2 (offloaded too) names the same dataset: the list is written once per session.
        cursor = page["pagination"]["next_cursor"]
        second = structured(await c.call_tool("regex_search", {"cursor": cursor, "output_mode": "file_ref"}))
        assert second["results"]["file_ref"]["dataset"]["id"] == dataset["id"]
        listed = structured(await c.call_tool("list-saved-datasets", {}))
        assert sorted(d["rows"] for d in listed["datasets"]) == [50, 50, TOTAL]


async def test_a_page_that_is_the_whole_list_is_its_own_dataset(code_tree, tmp_path):
    async with Client(build_app(make_settings(code_tree, tmp_path))) as c:
        args = {"pattern": "needle_3_", "output_mode": "file_ref"}
        ref = structured(await c.call_tool("regex_search", args))["results"]["file_ref"]
        assert ref["dataset"]["id"] == ref["id"] and ref["dataset"]["rows"] == ref["dataset"]["total_count"] == 20
        assert structured(await c.call_tool("list-saved-datasets", {}))["count"] == 1


async def test_a_jq_filtered_list_is_the_dataset(code_tree, tmp_path):
    """The dataset is the list the pages walk: with a jq_filter, the filtered one."""
    async with Client(build_app(make_settings(code_tree, tmp_path))) as c:
        args = {
            "pattern": "needle",
            "jq_filter": 'map(select(.path | startswith("pkg/")))',
            "page_size": 10,
            "output_mode": "file_ref",
        }
        page = structured(await c.call_tool("regex_search", args))
        dataset = page["results"]["file_ref"]["dataset"]
        assert dataset["rows"] == page["results"]["total_count"] == TOTAL // 2
        assert await sql(c, "SELECT count(*) AS n FROM dataset WHERE path LIKE 'lib/%'", dataset["id"]) == [{"n": 0}]


async def test_a_list_over_the_row_cap_is_cut_and_the_descriptor_says_by_how_much(code_tree, tmp_path):
    settings = make_settings(code_tree, tmp_path, sql={"max_rows": 100})
    async with Client(build_app(settings)) as c:
        args = {"pattern": "needle", "page_size": 50, "output_mode": "file_ref"}
        dataset = structured(await c.call_tool("regex_search", args))["results"]["file_ref"]["dataset"]
        assert (dataset["rows"], dataset["total_count"], dataset["left_out"]) == (100, TOTAL, TOTAL - 100)
        assert "sql.max_rows" in dataset["note"] and "140 left out" in dataset["note"]
        assert await sql(c, "SELECT count(*) AS n FROM dataset", dataset["id"]) == [{"n": 100}]


async def test_a_list_over_the_byte_cap_is_cut_within_it(code_tree, tmp_path, monkeypatch):
    cap = 8_000
    monkeypatch.setattr("server.output.layer.MAX_RESULT_BYTES", cap)
    settings = make_settings(code_tree, tmp_path)
    async with Client(build_app(settings)) as c:
        args = {"pattern": "needle", "page_size": 20, "output_mode": "file_ref"}
        dataset = structured(await c.call_tool("regex_search", args))["results"]["file_ref"]["dataset"]
        assert 20 < dataset["rows"] < TOTAL and dataset["left_out"] == TOTAL - dataset["rows"]
        assert "reached 8,000 bytes" in dataset["note"]
        body = Path(dataset["path"]).read_bytes().split(b"\n", 1)[1]
        assert len(body) <= cap and body.count(b"\n") == dataset["rows"]


def test_the_list_is_written_a_record_at_a_time(tmp_path: Path) -> None:
    """The whole list is written as its records are made (spooled to disk), never held as a
    second copy: 8 MiB of records cost the writer well under 4 MiB of memory at the peak."""
    store = OffloadStore(tmp_path / "offload")
    lists = ListDatasets(store, max_rows=100_000, max_bytes=64 << 20)
    page = store.write(tool="regex_search", query="q", records=[{"path": "a", "line": 1, "text": "x"}])
    n, text = 8_192, "y" * 1000

    def records() -> Any:
        return ({"path": f"src/f{i % 50}.py", "line": i + 1, "text": text} for i in range(n))

    tracemalloc.start()
    try:
        saved = lists.save(WholeList("k", n, records), page, 1, tool="regex_search", query="q")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert saved.rows == n and saved.file.path.stat().st_size > n * 1000
    assert peak < 4 << 20, peak
    lines = saved.file.path.read_text().splitlines()
    assert Counter(json.loads(line)["path"] for line in lines[1:])["src/f0.py"] == n // 50 + 1


async def test_the_list_file_is_rewritten_when_it_expired(tmp_path):
    root = write_code_tree(tmp_path / "repo", files=4, hits_per_file=30)
    async with Client(build_app(make_settings(root, tmp_path))) as c:
        args = {"pattern": "needle", "page_size": 10, "output_mode": "file_ref"}
        page = structured(await c.call_tool("regex_search", args))
        first = page["results"]["file_ref"]["dataset"]
        Path(first["path"]).unlink()
        second = structured(
            await c.call_tool("regex_search", {"cursor": page["pagination"]["next_cursor"], "output_mode": "file_ref"})
        )
        again = second["results"]["file_ref"]["dataset"]
        assert again["id"] != first["id"] and Path(again["path"]).exists() and again["rows"] == 120
