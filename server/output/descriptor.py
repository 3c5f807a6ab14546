"""Descriptors: what an agent is told of data saved for it instead of sent. `describe` is the
one builder, for an offloaded page (laid out here as a file_ref) and for a proxied result
saved as a dataset (laid out by `server.proxy.answer`): each shows as many of the records'
top-level fields as fit, in record key order (a SQL row or a tool's record can have
thousands, so clipping long strings alone never bounds it), and says where the rest are.

A file_ref answers, in one compact object: where the data is (path, MCP resource URIs), how
big it is, what a line looks like (field list and JSON Schema), what is in it (summary with
one sample record), how to query it (jq recipes with the real path, SQL view name) and how to
continue (the next page's cursor stays in the response's `pagination`). For a search page, the
recipes and SQL read the page's whole result list (`list_dataset`), which `dataset` names with
its row count beside `total_count`.

An agent with a shell should not have to work out the file's layout before it can use it: it
copies a jq recipe. Every recipe skips the header on line 1 (`tail -n +2`, or `head -n 1` for
the header itself), quotes the path and the program for a POSIX shell, and uses only jq 1.6
features. Examples (the glob, the search word, the field to group by) are taken from the data,
so each recipe prints something when run as is; a test runs every one with the real jq.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePath, PurePosixPath
from typing import Any, TypeVar

from server.output.files import dataset_view
from server.output.fit import clip_strings, largest_fitting, project
from server.output.list_dataset import ListDataset
from server.output.offload import LINES_URI, RESULTS_URI, OffloadedFile
from server.output.schema import SAMPLE_MAX_CHARS, clashing_keys, infer_schema, leaf_fields, named_keys
from server.output.stats import Stats, compute_stats, record_path

T = TypeVar("T")

JSONL_MIME_TYPE = "application/x-ndjson"
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
#: Keys named in the note on a page SQL reads as one JSON column, and their length at most.
_KEYS_NAMED, _KEY_CHARS = 3, 40


@dataclass(frozen=True, slots=True)
class Recipe:
    description: str
    command: str


def _jq(path: str, program: str, *flags: str, header: bool = False) -> str:
    source = f"head -n 1 {shlex.quote(path)}" if header else f"tail -n +2 {shlex.quote(path)}"
    return " ".join([source, "|", "jq", *flags, shlex.quote(program)])


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
_HEADER = "Read the header on line 1 (tool, query, count)"


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
    first = records[0] if records else None
    f = _FULL if isinstance(first, dict) and isinstance(first.get("file"), dict) else _COMPACT
    glob, path_regex = _path_example(stats)
    word = _content_word(records)
    per_file = f"group_by({f.path}) | map({{path: .[0]{f.path}, count: length}}) | sort_by(-.count) | .[]"
    recipes = [
        Recipe(_HEADER, _jq(path, ".", header=True)),
        Recipe("List path:line of every match", _jq(path, f'"\\({f.path}):\\({f.line})"', "-r")),
        Recipe(
            f"Keep matches whose path matches the glob {glob} (written as a regex; edit it)",
            _jq(path, f"select({f.path} | test({path_regex}))", "-c"),
        ),
        Recipe(
            f"Keep matches whose content contains {word!r} (regex, case-insensitive; edit it)",
            _jq(path, f'select(({f.content} // "") | test({json.dumps(re.escape(word))}; "i"))', "-c"),
        ),
        Recipe("Count matches per file, most first", _jq(path, per_file, "-s", "-c")),
    ]
    if f.language is not None:
        per_language = f"group_by({f.language}) | map({{language: .[0]{f.language}, count: length}}) | .[]"
        recipes.append(Recipe("Count matches per language", _jq(path, per_language, "-s", "-c")))
    recipes.append(
        Recipe("Show the first match in full (record k is on line k+1)", f"sed -n 2p {shlex.quote(path)} | jq .")
    )
    if stats.score_min is not None:
        top = f"sort_by(-({f.score} // 0)) | .[:10] | .[] | {{path: {f.path}, line: {f.line}, score: {f.score}}}"
        recipes.append(Recipe("Top 10 matches by score", _jq(path, top, "-s", "-c")))
    return recipes


def generic_recipes(path: str, records: Sequence[Any]) -> list[Recipe]:
    """Recipes for records of any other shape (SQL rows, proxied tool output); the examples use
    the first top-level key with a scalar value."""
    recipes = [
        Recipe(_HEADER, _jq(path, ".", header=True)),
        Recipe("Count the records", _jq(path, "length", "-s")),
        Recipe("Show the first 5 records, one per line", _jq(path, "limit(5; .[])", "-s", "-c")),
        Recipe("List the keys used by the records", _jq(path, "map(keys_unsorted? // []) | add | unique", "-s", "-c")),
    ]
    scalars = (
        (key, value)
        for record in records
        if isinstance(record, dict)
        for key, value in record.items()
        if value is None or isinstance(value, (str, int, float, bool))
    )
    for key, value in itertools.islice(scalars, 1):
        field, shown = f".{json.dumps(key)}", json.dumps(value)
        per_value = f"group_by({field}) | map({{value: .[0]{field}, count: length}}) | .[]"
        recipes += [
            Recipe(
                f"Keep records whose {key!r} equals {shown} (edit the value)",
                _jq(path, f"select({field} == {shown})", "-c"),
            ),
            Recipe(f"Count records per value of {key!r}", _jq(path, per_value, "-s", "-c")),
        ]
    return recipes


def recipes_for(path: str, records: Sequence[Any], stats: Stats) -> list[Recipe]:
    """Match recipes when the lines are search matches, generic ones otherwise."""
    if records and record_path(records[0]) is not None and stats.top_files:
        return match_recipes(path, records, stats)
    return generic_recipes(path, records)


@dataclass(frozen=True, slots=True, kw_only=True)
class FileRef:
    id: str
    path: str
    uri: str
    size_bytes: int
    line_count: int
    #: A search page's whole result list (`list_dataset`); left out of the dict when None.
    dataset: dict[str, Any] | None = None
    fields: list[str]
    fields_omitted: int = 0  # left out of the dict when 0
    line_schema: dict[str, Any]
    summary: dict[str, Any]
    jq_recipes: list[Recipe]
    guidance: str

    @property
    def name(self) -> str:
        """The file's name, for a resource_link content block."""
        return PurePath(self.path).name

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if not self.fields_omitted:
            del out["fields_omitted"]
        if self.dataset is None:
            del out["dataset"]
        return {**out, "jq_recipes": list(map(dataclasses.asdict, self.jq_recipes))}


@dataclass(frozen=True, slots=True)
class Shown:
    """What a descriptor has room for: the first fields (`names`), the sample records cut to
    them, how many fields are left out and the note saying where they are (None when none is)."""

    names: list[str]
    sample: list[Any]
    omitted: int
    more: str | None


def describe(
    names: Sequence[str],
    sample: Sequence[Any],
    *,
    everything: str,
    render: Callable[[Shown], T],
    fits: Callable[[T], bool],
    floor: Callable[[Shown], T] | None = None,
) -> T:
    """`render` of the first `k` of a dataset's top-level fields `names`, `k` the most `fits`
    accepts; `everything` says where an agent sees the rest. When not even `k = 0` fits, that
    is returned, or `floor` of it when the caller has a smaller answer still. `sample` records
    come clipped (`clip_strings`): projecting them to the first fields is all `k` changes."""

    def first(k: int) -> Shown:
        kept, omitted = set(names[:k]), len(names) - k
        more = f"and {omitted:,} more fields, not listed here to stay within the output limit: see {everything}"
        return Shown(list(names[:k]), [project(r, kept) for r in sample], omitted, more if omitted else None)

    best, fit = largest_fitting(lambda k: render(first(k)), len(names), fits)
    return best if fit or floor is None else floor(first(0))


def _summary(count: int, shown: Shown, stats: Stats) -> dict[str, Any]:
    """`count` records in the file; the sample is the first."""
    summary: dict[str, Any] = {"records": count}
    if stats.top_files:
        summary["top_files"] = stats.to_dict()["top_files"]
        summary["languages"] = stats.languages
    if stats.score_min is not None:
        summary["score_range"] = {"min": stats.score_min, "max": stats.score_max}
    summary["sample"] = shown.sample[0] if shown.sample else None
    return summary


def _first_fields(schema: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """`schema` describing only the top-level properties `names`."""
    if "properties" not in schema:
        return schema
    kept = set(names)
    return {
        **schema,
        "properties": {k: v for k, v in schema["properties"].items() if k in kept},
        "required": [k for k in schema.get("required", []) if k in kept],
    }


def _json_view_note(f: OffloadedFile) -> str | None:
    """What SQL sees when it cannot make each record key a column (`clashing_keys`, as the
    view does): each line is then one JSON column, `value`, and a `SELECT "ID"` the field list
    suggests would fail. None when every key is a column."""
    keys = list(f.header.get("record_keys") or [])
    own = set(keys)
    clashes = [k for k in clashing_keys([*f.header, *keys]) if k in own]
    if keys and not clashes:
        return None
    if not keys:
        return "There each line is one JSON column, value."
    named = named_keys(clashes, most=_KEYS_NAMED, chars=_KEY_CHARS)
    return (
        f"There each line is one JSON column, value, since the keys {named} "
        "cannot each be a column (SQL names ignore case, and cannot be empty, and a page's header line has keys "
        "of its own): read a key as text with a JSON Pointer, value->>'/KEY' (~ and / in a key written ~0 and ~1)."
    )


#: About how much of an offloaded page the guidance suggests reading at once (~5,000 tokens):
#: a page is offloaded for being too big to show, and reading it whole over MCP sent the agent
#: 198,669 characters in one answer.
READ_WINDOW_BYTES = 20_000


def _first_window(f: OffloadedFile) -> str:
    """The lines resource of the first ~READ_WINDOW_BYTES of results (line 1 is the header)."""
    records = max(f.line_count - 1, 1)
    per_line = max(f.size_bytes / f.line_count, 1.0) if f.line_count else 1.0
    lines = min(records, max(1, int(READ_WINDOW_BYTES / per_line)))
    return LINES_URI.format(id=f.id, start=2, end=1 + lines)


def _guidance(
    f: OffloadedFile,
    *,
    has_more: bool,
    retention_hours: float,
    sql_tool: str | None,
    dataset: ListDataset | None,
) -> tuple[str, str]:
    """The guidance before and after the note on omitted fields: the same for every k tried.
    It leads with reading the file in parts (jq, a line range), never the whole of it at once."""
    data = f if dataset is None else dataset.file
    head = [
        f"This page ({f.line_count - 1} records, {f.size_bytes:,} bytes) is in {f.path} as JSON Lines:",
        "line 1 is a header (tool, query, count, next_cursor), each other line one result exactly as inline output",
        "shows it (see line_schema). Read it in parts: with jq (the jq_recipes run as they are; skip the header:",
        f"tail -n +2 FILE | jq ...), or without a shell over MCP, {_first_window(f)} (at most about",
        f"{READ_WINDOW_BYTES // 1000} KB), then the lines after it. {RESULTS_URI.format(id=f.id)} is the whole file",
        "in one answer.",
    ]
    if dataset is not None and data is not f:
        head.append(
            f"SQL and the jq_recipes read the whole result list instead, {data.path}, laid out the same "
            "(see dataset: its rows beside total_count)."
        )
    elif dataset is not None and dataset.left_out:
        head.append(f"SQL and the jq_recipes see {dataset.note(is_page=True)}.")
    tail = []
    if sql_tool:
        tail.append(f"For SQL, call {sql_tool} with dataset_id={data.id} (view {dataset_view(data.id)}).")
        if (json_view := _json_view_note(data)) is not None:
            tail.append(json_view)
    tail.append(
        "Next page: call the same tool with cursor = pagination.next_cursor." if has_more else "This is the last page."
    )
    tail.append(f"The file is deleted after {retention_hours:g} h.")
    return " ".join(head), " ".join(tail)


def build_file_ref(
    offloaded: OffloadedFile,
    records: Sequence[Any],
    *,
    has_more: bool,
    retention_hours: float,
    sql_tool: str | None = "analyze-with-duckdb",
    fits: Callable[[FileRef], bool] = lambda _: True,
    dataset: ListDataset | None = None,
) -> FileRef:
    """The descriptor (`describe`) of a file `OffloadStore.write` just wrote from `records` (or
    of a larger one, `records` its first lines), laid out as a file_ref. `dataset`: the whole
    result list a search page is cut from, which the descriptor names for SQL and jq."""
    stats = compute_stats(records)
    schema = infer_schema(records)
    path = str(offloaded.path)
    data = offloaded if dataset is None else dataset.file
    recipes = recipes_for(str(data.path), records, stats)
    keys = "the keys of any line (see jq_recipes)"
    everything = f"DESCRIBE {dataset_view(data.id)} via {sql_tool}, or {keys}" if sql_tool else keys
    head, tail = _guidance(
        offloaded, has_more=has_more, retention_hours=retention_hours, sql_tool=sql_tool, dataset=dataset
    )
    described = None if dataset is None else dataset.to_dict(is_page=data is offloaded)

    def render(shown: Shown) -> FileRef:
        line_schema = _first_fields(schema, shown.names)
        return FileRef(
            id=offloaded.id,
            path=path,
            uri=RESULTS_URI.format(id=offloaded.id),
            size_bytes=offloaded.size_bytes,
            line_count=offloaded.line_count,
            dataset=described,
            fields=leaf_fields(line_schema),
            line_schema=line_schema,
            summary=_summary(offloaded.line_count - 1, shown, stats),
            jq_recipes=recipes,
            guidance=f"{head} fields, line_schema and summary.sample cover the first fields only ({shown.more}). {tail}"
            if shown.more
            else f"{head} {tail}",
            fields_omitted=shown.omitted,
        )

    sample = [clip_strings(records[0], SAMPLE_MAX_CHARS)] if records else []
    return describe(list(schema.get("properties", {})), sample, everything=everything, render=render, fits=fits)
