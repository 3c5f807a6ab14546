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

from tests.jq_recipes import run_recipe
from tests.output_helpers import make_layer, make_page, make_records, options


def assert_equal(a: Any, b: Any) -> None:
    assert a == b


def _json_lines(out: str) -> list[Any]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def _descriptor(tmp_path: Path, records: list[Any], page_size: int | None = None, **kw: Any) -> dict[str, Any]:
    out = tmp_path / "it's a dir with spaces"
    r = make_layer(out).render(make_page(records, page_size), options(output_mode="file_ref", **kw))
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
    for phrase in ("Line 1 is a header", "tail -n +2", "next_cursor", fr["uri"], f"dataset_{fr['id']}"):
        assert phrase in guidance
    assert len(guidance) < 1200


def test_last_page_guidance_says_so(tmp_path: Path) -> None:
    fr = _descriptor(tmp_path, make_records(5))
    assert "This is the last page." in fr["guidance"] and "cursor =" not in fr["guidance"]
