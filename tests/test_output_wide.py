"""Records of any width through the real analyze-with-duckdb tool: a SELECT returning rows of
1,500 columns in auto mode goes to a file, and the file_ref answer (field list, line schema,
sample) still fits the output ceiling, lists the first fields and says where the rest are;
the offloaded page keeps every column for SQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastmcp import Client

from server.app import build_app
from server.output import OffloadStore, estimate_tokens
from tests.server_helpers import make_settings, structured

COLUMNS = 1500


def wide_rows(rows: int) -> list[dict[str, str]]:
    return [{f"col_{k:04d}": f"value {i} {k}" for k in range(COLUMNS)} for i in range(rows)]


@pytest.mark.slow
async def test_a_select_of_wide_rows_gets_a_file_ref_within_the_ceiling(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, tmp_path)
    source = OffloadStore(settings.offload.output_dir).write(tool="t", query="wide", records=wide_rows(50)).id
    async with Client(build_app(settings)) as c:
        result = await c.call_tool("analyze-with-duckdb", {"query": f"SELECT * FROM dataset_{source}"})
        assert estimate_tokens(result.content[0].text) <= settings.offload.max_tokens
        body = structured(result)
        ref = body["results"]["file_ref"]
        assert body["results"]["mode"] == "file_ref" and body["results"]["total_count"] == 50
        listed = ref["fields"]
        assert 0 < len(listed) < COLUMNS and listed == [f"col_{k:04d}" for k in range(len(listed))]
        assert ref["fields_omitted"] == COLUMNS - len(listed)
        assert list(ref["line_schema"]["properties"]) == listed and list(ref["summary"]["sample"]) == listed
        assert (
            f"{COLUMNS - len(listed):,} more fields" in ref["guidance"]
            and f"DESCRIBE dataset_{ref['id']}" in ref["guidance"]
        )

        described = structured(await c.call_tool("analyze-with-duckdb", {"query": f"DESCRIBE dataset_{ref['id']}"}))
        assert described["results"]["total_count"] == COLUMNS  # one row per column, itself offloaded
        sql = f"SELECT col_1499 FROM dataset_{ref['id']} LIMIT 1"
        last = structured(await c.call_tool("analyze-with-duckdb", {"query": sql}))
        assert last["results"]["rows"] == [{"col_1499": "value 0 1499"}]


async def test_narrow_rows_get_every_field(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, tmp_path)
    async with Client(build_app(settings)) as c:
        sql = "SELECT range AS i, repeat('x', 50) AS pad FROM range(3000)"
        ref = structured(await c.call_tool("analyze-with-duckdb", {"query": sql}))["results"]["file_ref"]
        assert ref["fields"] == ["i", "pad"] and "fields_omitted" not in ref and "more fields" not in ref["guidance"]


async def test_one_row_holding_a_map_of_5000_values_is_cut_to_its_first_members_inline(tmp_path: Path) -> None:
    """Before: inline, one such row (140 KB) over the ceiling took 22 s of a server thread to
    cut (20,000 values: 414 s, far past the SQL timeout, which covers only DuckDB) and still did
    not fit. Now the map keeps its first members and says how many were cut."""
    settings = make_settings(tmp_path, tmp_path)
    query = (
        "SELECT 7 AS id, map_from_entries(list(struct_pack(k := i::VARCHAR, v := repeat('x', 20)))) AS m "
        "FROM range(5000) t(i)"
    )
    async with Client(build_app(settings)) as c:
        result = await c.call_tool("analyze-with-duckdb", {"query": query, "output_mode": "inline"})
        assert estimate_tokens(result.content[0].text) <= settings.offload.max_tokens
        body = structured(result)
        [row] = body["results"]["rows"]
        assert row["id"] == 7 and list(row["m"])[:2] == ["0", "1"]
        assert row["m"]["…"] == f"…[cut {5000 - (len(row['m']) - 1)} members to fit the output limit]"
        assert any("cut N members" in w for w in body["metadata"]["warnings"])
