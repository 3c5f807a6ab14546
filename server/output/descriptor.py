"""The file_ref descriptor: everything an agent needs to use an offloaded page without guessing.

It answers, in one compact object: where the data is (path, MCP resource URIs), how big it is,
what a line looks like (field list and JSON Schema), what is in it (summary with one sample
record), how to query it (jq recipes with the real path, SQL view name) and how to continue
(the next page's cursor stays in the response's `pagination`).

Its size is bounded whatever the width of the records (`bounded`): the field list, the line
schema and the sample cover the first `k` top-level fields, `k` the largest for which the
caller's `fits` accepts the descriptor, and `fields_omitted` counts the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from server.output.fit import clip_strings, largest_fitting, omitted_fields_note, project
from server.output.offload import OffloadedFile
from server.output.recipes import Recipe, recipes_for
from server.output.schema import infer_schema, leaf_fields
from server.output.stats import Stats, compute_stats

RESULTS_URI = "codepager://results/{id}"
JSONL_MIME_TYPE = "application/x-ndjson"
LINES_URI = "codepager://results/{id}/lines/{start}-{end}"
#: Strings in the sample record are clipped so the descriptor stays small whatever the data.
SAMPLE_MAX_CHARS = 200


def results_uri(dataset_id: str) -> str:
    return RESULTS_URI.format(id=dataset_id)


@dataclass(frozen=True, slots=True)
class FileRef:
    id: str
    path: str
    uri: str
    size_bytes: int
    line_count: int
    fields: list[str]
    line_schema: dict[str, Any]
    summary: dict[str, Any]
    jq_recipes: list[Recipe]
    guidance: str
    fields_omitted: int = 0

    @property
    def name(self) -> str:
        """The file's name, for a resource_link content block."""
        return PurePath(self.path).name

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "path": self.path,
            "uri": self.uri,
            "size_bytes": self.size_bytes,
            "line_count": self.line_count,
            "fields": self.fields,
        }
        if self.fields_omitted:
            out["fields_omitted"] = self.fields_omitted
        out.update(
            line_schema=self.line_schema,
            summary=self.summary,
            jq_recipes=[r.to_dict() for r in self.jq_recipes],
            guidance=self.guidance,
        )
        return out


def _summary(count: int, records: Sequence[Any], stats: Stats, names: Sequence[str]) -> dict[str, Any]:
    """`count` records in the file, of which `records` (all, or a sample) were seen."""
    summary: dict[str, Any] = {"records": count}
    if stats.top_files:
        summary["top_files"] = stats.to_dict()["top_files"]
        summary["languages"] = stats.languages
    if stats.score_min is not None:
        summary["score_range"] = {"min": stats.score_min, "max": stats.score_max}
    summary["sample"] = clip_strings(project(records[0], names), SAMPLE_MAX_CHARS) if records else None
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


def _guidance(f: OffloadedFile, *, has_more: bool, retention_hours: float, sql_tool: str | None, omitted: int) -> str:
    parts = [
        f"This page ({f.line_count - 1} records) is in {f.path} as JSON Lines.",
        "Line 1 is a header (tool, query, count, next_cursor), not a result: skip it (tail -n +2 FILE | jq ...).",
        "Every other line is one result exactly as inline output shows it (see line_schema);",
        "the jq_recipes run as they are.",
        f"Without a shell, read it over MCP: {results_uri(f.id)} (whole file) or "
        f"{LINES_URI.format(id=f.id, start='START', end='END')} (1-based lines, header is line 1).",
    ]
    if omitted:
        note = omitted_fields_note(omitted, _all_fields(f.id, sql_tool))
        parts.append(f"fields, line_schema and summary.sample cover the first fields only ({note}).")
    if sql_tool:
        parts.append(f"For SQL, call {sql_tool} with dataset_id={f.id} (view dataset_{f.id}).")
    parts.append(
        "Next page: call the same tool with cursor = pagination.next_cursor." if has_more else "This is the last page."
    )
    parts.append(f"The file is deleted after {retention_hours:g} h.")
    return " ".join(parts)


def _all_fields(dataset_id: str, sql_tool: str | None) -> str:
    """Where an agent sees every field of an offloaded page."""
    keys = "the keys of any line (see jq_recipes)"
    return f"DESCRIBE dataset_{dataset_id} via {sql_tool}, or {keys}" if sql_tool else keys


def build_file_ref(
    offloaded: OffloadedFile,
    records: Sequence[Any],
    *,
    has_more: bool,
    retention_hours: float,
    sql_tool: str | None = "analyze-with-duckdb",
    fits: Callable[[FileRef], bool] = lambda _: True,
) -> FileRef:
    """The descriptor of a file `OffloadStore.write` just wrote from `records` (or of a larger
    one, `records` its first lines), covering as many top-level fields as `fits` accepts (the
    fewest fields when none does)."""
    stats = compute_stats(records)
    schema = infer_schema(records)
    names = list(schema.get("properties", {}))
    path = str(offloaded.path)
    recipes = recipes_for(path, records, stats)

    def build(k: int) -> FileRef:
        kept = names[:k]
        shown = _first_fields(schema, kept)
        omitted = len(names) - k
        return FileRef(
            id=offloaded.id,
            path=path,
            uri=results_uri(offloaded.id),
            size_bytes=offloaded.size_bytes,
            line_count=offloaded.line_count,
            fields=leaf_fields(shown),
            line_schema=shown,
            summary=_summary(offloaded.line_count - 1, records, stats, kept),
            jq_recipes=recipes,
            guidance=_guidance(
                offloaded, has_more=has_more, retention_hours=retention_hours, sql_tool=sql_tool, omitted=omitted
            ),
            fields_omitted=omitted,
        )

    return largest_fitting(build, len(names), fits)[0]
