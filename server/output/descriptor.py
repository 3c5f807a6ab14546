"""The file_ref descriptor: everything an agent needs to use an offloaded page without guessing.

It answers, in one compact object: where the data is (path, MCP resource URIs), how big it is,
what a line looks like (field list and JSON Schema), what is in it (summary with one sample
record), how to query it (jq recipes with the real path, SQL view name) and how to continue
(the next page's cursor stays in the response's `pagination`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from server.output.offload import OffloadedFile
from server.output.recipes import Recipe, recipes_for
from server.output.schema import infer_schema, leaf_fields
from server.output.shrink import clip_strings
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

    @property
    def name(self) -> str:
        """The file's name, for a resource_link content block."""
        return PurePath(self.path).name

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "path": self.path,
            "uri": self.uri,
            "size_bytes": self.size_bytes,
            "line_count": self.line_count,
            "fields": self.fields,
            "line_schema": self.line_schema,
            "summary": self.summary,
            "jq_recipes": [r.to_dict() for r in self.jq_recipes],
            "guidance": self.guidance,
        }


def _summary(records: Sequence[Any], stats: Stats) -> dict[str, Any]:
    summary: dict[str, Any] = {"records": len(records)}
    if stats.top_files:
        summary["top_files"] = stats.to_dict()["top_files"]
        summary["languages"] = stats.languages
    if stats.score_min is not None:
        summary["score_range"] = {"min": stats.score_min, "max": stats.score_max}
    summary["sample"] = clip_strings(records[0], SAMPLE_MAX_CHARS) if records else None
    return summary


def _guidance(f: OffloadedFile, *, has_more: bool, retention_hours: float, sql_tool: str | None) -> str:
    parts = [
        f"This page ({f.line_count - 1} records) is in {f.path} as JSON Lines.",
        "Line 1 is a header (tool, query, count, next_cursor), not a result: skip it (tail -n +2 FILE | jq ...).",
        "Every other line is one result exactly as inline output shows it (see line_schema);",
        "the jq_recipes run as they are.",
        f"Without a shell, read it over MCP: {results_uri(f.id)} (whole file) or "
        f"{LINES_URI.format(id=f.id, start='START', end='END')} (1-based lines, header is line 1).",
    ]
    if sql_tool:
        parts.append(f"For SQL, call {sql_tool} with dataset_id={f.id} (view dataset_{f.id}).")
    parts.append(
        "Next page: call the same tool with cursor = pagination.next_cursor." if has_more else "This is the last page."
    )
    parts.append(f"The file is deleted after {retention_hours:g} h.")
    return " ".join(parts)


def build_file_ref(
    offloaded: OffloadedFile,
    records: Sequence[Any],
    *,
    has_more: bool,
    retention_hours: float,
    sql_tool: str | None = "analyze-with-duckdb",
) -> FileRef:
    """The descriptor of a file `OffloadStore.write` just wrote from `records`."""
    stats = compute_stats(records)
    schema = infer_schema(records)
    path = str(offloaded.path)
    return FileRef(
        id=offloaded.id,
        path=path,
        uri=results_uri(offloaded.id),
        size_bytes=offloaded.size_bytes,
        line_count=offloaded.line_count,
        fields=leaf_fields(schema),
        line_schema=schema,
        summary=_summary(records, stats),
        jq_recipes=recipes_for(path, records, stats),
        guidance=_guidance(offloaded, has_more=has_more, retention_hours=retention_hours, sql_tool=sql_tool),
    )
