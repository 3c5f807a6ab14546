"""The file_ref descriptor: every jq recipe is run against a real offloaded file (in a directory
whose name needs shell quoting), its jq part on libjq (tests/jq_recipes.py), and its output
checked against the records."""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from server.output import OffloadStore, describe
from server.output.descriptor import build_file_ref
from server.proxy.answer import saved_answer
from server.proxy.dataset_store import DatasetStore
from server.proxy.extraction import Extracted
from server.proxy.profile import profile_records
from server.proxy.size import Size
from tests.jq_recipes import run_recipe
from tests.output_helpers import make_layer, make_page, make_records, options


def assert_equal(a: Any, b: Any) -> None:
    assert a == b


def _json_lines(out: str) -> list[Any]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def _descriptor(tmp_path: Path, records: list[Any], page_size: int | None = None, **kw: Any) -> dict[str, Any]:
    out = tmp_path / "it's a dir with spaces"
    r = make_layer(out).render(make_page(records, page_size), *options(output_mode="file_ref", **kw))
    file_ref: dict[str, Any] = r.structured["results"]["file_ref"]
    return file_ref


def _group(pattern: str, text: str) -> str:
    """The first group of `pattern` in `text`, which must be there."""
    found = re.search(pattern, text)
    assert found is not None, f"{pattern!r} not in {text!r}"
    return found.group(1)


def _match_checks(records: list[Any]) -> dict[str, Callable[[str, str], None]]:
    def header(out: str, _: str) -> None:
        h = json.loads(out)
        assert h["type"] == "codepager_header" and h["count"] == len(records)

    def list_lines(out: str, _: str) -> None:
        assert out.splitlines() == [f"{r['file']['path']}:{r['match']['span']['line_start']}" for r in records]

    def glob(out: str, description: str) -> None:
        suffix = _group(r"glob \*(\.\w+)", description)
        assert _json_lines(out) == [r for r in records if r["file"]["path"].endswith(suffix)]
        assert 0 < len(_json_lines(out)) < len(records)

    def content(out: str, description: str) -> None:
        word = _group(r"contains '(\w+)'", description)
        expected = [r for r in records if re.search(word, r["match"]["content"], re.I)]
        assert _json_lines(out) == expected and expected

    def per_file(out: str, _: str) -> None:
        rows = _json_lines(out)
        assert {row["path"]: row["count"] for row in rows} == dict(Counter(r["file"]["path"] for r in records))
        assert [row["count"] for row in rows] == sorted((row["count"] for row in rows), reverse=True)

    def per_language(out: str, _: str) -> None:
        rows = _json_lines(out)
        assert {row["language"]: row["count"] for row in rows} == dict(Counter(r["file"]["language"] for r in records))

    def first(out: str, _: str) -> None:
        assert json.loads(out) == records[0]

    def top(out: str, _: str) -> None:
        best = sorted(records, key=lambda r: -r["match"]["score"])[:10]
        assert _json_lines(out) == [
            {"path": r["file"]["path"], "line": r["match"]["span"]["line_start"], "score": r["match"]["score"]}
            for r in best
        ]

    return {
        "Read the header": header,
        "List path:line": list_lines,
        "Keep matches whose path matches the glob": glob,
        "Keep matches whose content contains": content,
        "Count matches per file": per_file,
        "Count matches per language": per_language,
        "Show the first match": first,
        "Top 10 matches by score": top,
    }


def _run_all(file_ref: dict[str, Any], checks: dict[str, Callable[[str, str], None]]) -> set[str]:
    used = set()
    for recipe in file_ref["jq_recipes"]:
        assert shlex.quote(file_ref["path"]) in recipe["command"]
        (prefix,) = [p for p in checks if recipe["description"].startswith(p)]
        checks[prefix](run_recipe(recipe["command"]), recipe["description"])
        used.add(prefix)
    return used


@pytest.mark.parametrize("scored", [False, True], ids=["regex", "semantic"])
def test_every_match_recipe_runs_on_the_real_file(tmp_path: Path, scored: bool) -> None:
    records = make_records(40, scored=scored, context=scored)
    file_ref = _descriptor(tmp_path, records)
    checks = _match_checks(records)
    used = _run_all(file_ref, checks)
    expected = set(checks) - (set() if scored else {"Top 10 matches by score"})
    assert used == expected


def test_every_generic_recipe_runs_on_the_real_file(tmp_path: Path) -> None:
    rows = [{"name": f"n{i % 4}", "value": i, "tags": ["a"] * (i % 3)} for i in range(23)]
    file_ref = _descriptor(tmp_path, rows, records_key="rows")

    def header(out: str, _: str) -> None:
        assert json.loads(out)["count"] == 23

    def equals(out: str, _: str) -> None:
        assert _json_lines(out) == [r for r in rows if r["name"] == "n0"]

    def per_value(out: str, _: str) -> None:
        assert {row["value"]: row["count"] for row in _json_lines(out)} == dict(Counter(r["name"] for r in rows))

    checks: dict[str, Callable[[str, str], None]] = {
        "Read the header": header,
        "Count the records": lambda out, _: assert_equal(int(out), 23),
        "Show the first 5 records": lambda out, _: assert_equal(_json_lines(out), rows[:5]),
        "List the keys": lambda out, _: assert_equal(json.loads(out), ["name", "tags", "value"]),
        "Keep records whose 'name' equals": equals,
        "Count records per value of 'name'": per_value,
    }
    assert _run_all(file_ref, checks) == set(checks)


def test_descriptor_contents(tmp_path: Path) -> None:
    records = make_records(30, scored=True, context=True)
    records[0]["match"]["content"] = "needle " + "z" * 5000
    fr = _descriptor(tmp_path, records, page_size=20)
    assert set(fr) == {
        "id",
        "path",
        "uri",
        "size_bytes",
        "line_count",
        "fields",
        "line_schema",
        "summary",
        "jq_recipes",
        "guidance",
    }
    path = Path(fr["path"])
    assert fr["size_bytes"] == path.stat().st_size and fr["line_count"] == 21 == len(path.read_text().splitlines())
    assert fr["uri"] == f"codepager://results/{fr['id']}"
    assert {
        "file.path",
        "file.language",
        "match.content",
        "match.score",
        "match.span.line_start",
        "context.before[]",
        "type",
    } <= set(fr["fields"])
    schema = fr["line_schema"]
    assert schema["type"] == "object" and set(schema["required"]) == {"file", "match", "type", "context"}
    assert schema["properties"]["match"]["properties"]["score"]["type"] == "number"
    assert schema["properties"]["context"]["properties"]["before"] == {"type": "array", "items": {"type": "string"}}
    summary = fr["summary"]
    assert summary["records"] == 20
    assert sum(f["count"] for f in summary["top_files"]) == 20
    assert summary["score_range"] == {"min": records[19]["match"]["score"], "max": records[0]["match"]["score"]}
    sample = summary["sample"]["match"]["content"]
    assert sample.startswith("needle zzz") and "…[cut " in sample and len(sample) < 300
    guidance = fr["guidance"]
    for phrase in ("line 1 is a header", "tail -n +2", "next_cursor", fr["uri"], f"dataset_{fr['id']}"):
        assert phrase in guidance
    assert len(guidance) < 1200


def test_last_page_guidance_says_so(tmp_path: Path) -> None:
    fr = _descriptor(tmp_path, make_records(5))
    assert "This is the last page." in fr["guidance"] and "cursor =" not in fr["guidance"]


# -- describe: the one descriptor builder, for a file_ref and the proxy's saved-dataset answer ----


def _shown_sizes(budget: int) -> Callable[[Any], bool]:
    """A `fits` that accepts a render of at most `budget` fields."""
    return lambda shown: len(shown.names) <= budget


@pytest.mark.parametrize("budget", [0, 1, 3, 5])
def test_describe_keeps_the_most_fields_that_fit_in_record_key_order(budget: int) -> None:
    """The largest prefix of the fields that fits is shown, the sample is cut to exactly those
    fields (other keys, and a non-object record, as they are), and the rest are counted with a
    note naming where they all are; nothing is said of omitted fields when none is."""
    names = ["id", "kind", "value", "note", "extra"]
    record: dict[str, Any] = {"note": "n", "id": 1, "kind": "a", "value": 2.5, "extra": None}
    sample = [record, [1, 2]]
    shown = describe(names, sample, everything="DESCRIBE t", render=lambda s: s, fits=_shown_sizes(budget))
    assert shown.names == names[:budget]
    assert shown.sample == [{k: v for k, v in record.items() if k in names[:budget]}, [1, 2]]
    assert shown.omitted == len(names) - budget
    if budget == len(names):
        assert shown.more is None
    else:
        assert shown.more == (
            f"and {len(names) - budget:,} more fields, not listed here to stay within the output limit: see DESCRIBE t"
        )


def test_describe_falls_back_to_the_floor_only_when_not_even_no_field_fits() -> None:
    """When the render of no field is still too large, the caller's floor (a smaller answer
    still, as the proxy's) gets that render's fields; without a floor, that render is the answer
    (a file_ref's floor is its fewest fields); and a floor is never used when some render fits."""
    names = ["a", "b"]

    def never(_: Any) -> bool:
        return False

    floor = describe(names, [], everything="x", render=lambda s: ("full", s), fits=never, floor=lambda s: ("floor", s))
    assert floor[0] == "floor" and floor[1].names == [] and floor[1].omitted == 2
    fewest = describe(names, [], everything="x", render=lambda s: ("full", s), fits=never)
    assert fewest[0] == "full" and fewest[1].names == []
    fits = describe(names, [], everything="x", render=lambda s: s, fits=_shown_sizes(1), floor=lambda s: None)
    assert fits is not None and fits.names == ["a"]


def test_a_file_ref_and_a_saved_dataset_answer_describe_wide_records_by_one_rule(tmp_path: Path) -> None:
    """The same wide records, offloaded as a page and saved by the proxy: both answers list a
    prefix of the fields in record key order and count the rest with the same note, each within
    its own budget."""
    columns = 400
    rows = [{f"c{i:03}": f"value {i} of row {r}" for i in range(columns)} for r in range(5)]
    order = list(rows[0])
    page = OffloadStore(tmp_path / "pages").write(tool="t", query="q", records=rows)
    ref = build_file_ref(
        page, rows, has_more=False, retention_hours=24, fits=lambda f: len(json.dumps(f.to_dict())) < 20_000
    )
    assert 0 < len(ref.fields) < columns and ref.fields == order[: len(ref.fields)]
    assert ref.fields_omitted == columns - len(ref.fields)
    assert (
        f"and {ref.fields_omitted:,} more fields, not listed here to stay within the output limit: see" in ref.guidance
    )

    store = DatasetStore(tmp_path / "datasets")
    extracted = Extracted(records=rows, format="json_records", records_from="$", envelope=None)
    profile = profile_records(rows, sample_size=64)
    saved = store.save(store.new_id(), rows, {}, as_json=False)
    answer = saved_answer(
        saved,
        extracted,
        profile,
        tool="t",
        server="s",
        size=Size(10**6, 10**6 // 4),
        threshold_tokens=8192,
        retention_days=7,
    )
    ds = answer.structured_content["dataset"]  # type: ignore[index]
    listed = list(ds["fields"])
    assert 0 < len(listed) < columns and listed == order[: len(listed)]
    assert ds["more_fields"].startswith(
        f"and {columns - len(listed):,} more fields, not listed here to stay within the output limit: see"
    )
    assert [list(r) for r in ds["sample_records"]] == [listed] * len(ds["sample_records"])
