"""Ready-to-run jq commands for an offloaded file, with its real path filled in.

An agent with a shell should not have to work out the file's layout before it can use it; it
copies a recipe. Every recipe skips the header on line 1 (`tail -n +2`, or `head -n 1` for the
header itself), quotes the path and the program for a POSIX shell, and uses only jq 1.6
features. Examples (the glob, the search word, the field to group by) are taken from the data,
so each recipe prints something when run as is; a test runs every one with the real jq.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from server.output.stats import Stats, record_path

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


@dataclass(frozen=True, slots=True)
class Recipe:
    description: str
    command: str

    def to_dict(self) -> dict[str, str]:
        return {"description": self.description, "command": self.command}


def _jq(path: str, program: str, *flags: str, header: bool = False) -> str:
    source = f"head -n 1 {shlex.quote(path)}" if header else f"tail -n +2 {shlex.quote(path)}"
    return " ".join([source, "|", "jq", *flags, shlex.quote(program)])


def _regex_literal(text: str) -> str:
    """A jq string literal holding a regex that matches `text` literally."""
    return json.dumps(re.escape(text))


def _path_example(stats: Stats) -> tuple[str, str]:
    """(glob shown to the agent, regex used in jq) for the most common file extension."""
    suffixes: dict[str, int] = {}
    for path, count in stats.top_files:
        suffix = PurePosixPath(path).suffix
        if suffix:
            suffixes[suffix] = suffixes.get(suffix, 0) + count
    if suffixes:
        suffix = max(suffixes, key=lambda s: suffixes[s])
        return f"*{suffix}", json.dumps(re.escape(suffix) + "$")
    first = stats.top_files[0][0]
    return first, json.dumps("^" + re.escape(first) + "$")


@dataclass(frozen=True, slots=True)
class _MatchFields:
    """Where a match record of one detail level (`server.records`) keeps each field, as jq paths."""

    path: str
    line: str
    content: str
    score: str
    language: str | None


_FULL = _MatchFields(".file.path", ".match.span.line_start", ".match.content", ".match.score", ".file.language")
_COMPACT = _MatchFields(".path", ".line", ".text", ".score", None)


def _fields_of(record: Any) -> _MatchFields:
    return _FULL if isinstance(record, dict) and isinstance(record.get("file"), dict) else _COMPACT


def _content_word(records: Sequence[Any]) -> str:
    for record in records:
        if not isinstance(record, dict):
            continue
        content = record.get("match", {}).get("content") if "match" in record else record.get("text")
        if isinstance(content, str) and (m := _WORD.search(content)):
            return m.group(0)
    return "TODO"


def match_recipes(path: str, records: Sequence[Any], stats: Stats) -> list[Recipe]:
    """Recipes for search matches, compact (`{"path", "line", "text"}`) or full (`{"file":
    {"path"}, "match": {"span", "content"}}`) lines."""
    f = _fields_of(records[0] if records else None)
    glob, path_regex = _path_example(stats)
    word = _content_word(records)
    recipes = [
        Recipe("Read the header on line 1 (tool, query, count, next_cursor)", _jq(path, ".", header=True)),
        Recipe("List path:line of every match", _jq(path, f'"\\({f.path}):\\({f.line})"', "-r")),
        Recipe(
            f"Keep matches whose path matches the glob {glob} (written as a regex; edit it)",
            _jq(path, f"select({f.path} | test({path_regex}))", "-c"),
        ),
        Recipe(
            f"Keep matches whose content contains {word!r} (regex, case-insensitive; edit it)",
            _jq(path, f'select(({f.content} // "") | test({_regex_literal(word)}; "i"))', "-c"),
        ),
        Recipe(
            "Count matches per file, most first",
            _jq(
                path,
                f"group_by({f.path}) | map({{path: .[0]{f.path}, count: length}}) | sort_by(-.count) | .[]",
                "-s",
                "-c",
            ),
        ),
    ]
    if f.language is not None:
        recipes.append(
            Recipe(
                "Count matches per language",
                _jq(
                    path, f"group_by({f.language}) | map({{language: .[0]{f.language}, count: length}}) | .[]", "-s", "-c"
                ),
            )
        )
    recipes.append(
        Recipe("Show the first match in full (record k is on line k+1)", f"sed -n 2p {shlex.quote(path)} | jq .")
    )
    if stats.score_min is not None:
        recipes.append(
            Recipe(
                "Top 10 matches by score",
                _jq(
                    path,
                    f"sort_by(-({f.score} // 0)) | .[:10] | .[]"
                    f" | {{path: {f.path}, line: {f.line}, score: {f.score}}}",
                    "-s",
                    "-c",
                ),
            )
        )
    return recipes


def _example_field(records: Sequence[Any]) -> tuple[str, Any] | None:
    """The first top-level key with a scalar value, and that value."""
    for record in records:
        if isinstance(record, dict):
            for key, value in record.items():
                if value is None or isinstance(value, (str, int, float, bool)):
                    return key, value
    return None


def generic_recipes(path: str, records: Sequence[Any]) -> list[Recipe]:
    """Recipes for records of any other shape (SQL rows, proxied tool output)."""
    recipes = [
        Recipe("Read the header on line 1 (tool, query, count, next_cursor)", _jq(path, ".", header=True)),
        Recipe("Count the records", _jq(path, "length", "-s")),
        Recipe("Show the first 5 records, one per line", _jq(path, "limit(5; .[])", "-s", "-c")),
        Recipe("List the keys used by the records", _jq(path, "map(keys_unsorted? // []) | add | unique", "-s", "-c")),
    ]
    example = _example_field(records)
    if example is not None:
        key, value = example
        field = f".{json.dumps(key)}"
        recipes += [
            Recipe(
                f"Keep records whose {key!r} equals {json.dumps(value)} (edit the value)",
                _jq(path, f"select({field} == {json.dumps(value)})", "-c"),
            ),
            Recipe(
                f"Count records per value of {key!r}",
                _jq(path, f"group_by({field}) | map({{value: .[0]{field}, count: length}}) | .[]", "-s", "-c"),
            ),
        ]
    return recipes


def recipes_for(path: str, records: Sequence[Any], stats: Stats) -> list[Recipe]:
    """Match recipes when the lines are search matches, generic ones otherwise."""
    if records and record_path(records[0]) is not None and stats.top_files:
        return match_recipes(path, records, stats)
    return generic_recipes(path, records)
