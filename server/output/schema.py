"""What records look like, inferred from the records themselves: the JSON Schema of an
offloaded file's lines (the proxy's dataset profile builds on it), and which of their keys can
each be a column when SQL reads them (`clashing_keys`: the views, the proxy's answer and the
file_ref's guidance must agree on it).

The layer serves search matches, SQL rows and arbitrary proxied tool output, so the schema is
inferred rather than declared: whatever an agent will find on a line is described, including
optional keys (absent from `required`) and mixed types (a `type` list). Inference reads an
evenly spread sample of records (the pages it describes are nearly always uniform: one
producer, one shape), so a 10 MB page costs the same as a 100 KB one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from server.output.fit import clip_strings

SAMPLE_SIZE = 64
#: Strings in sample records (a profile's, a descriptor's) are clipped so a description stays
#: small whatever the data.
SAMPLE_MAX_CHARS = 200

_JSON_TYPES: dict[type, str] = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
    type(None): "null",
}


@dataclass
class _Shape:
    """Everything seen at one position of the records, merged."""

    types: set[str] = field(default_factory=set)
    objects: int = 0
    key_counts: dict[str, int] = field(default_factory=dict)
    properties: dict[str, _Shape] = field(default_factory=dict)
    items: _Shape | None = None

    def add(self, value: Any) -> None:
        kind = _JSON_TYPES.get(type(value), "string")
        self.types.add(kind)
        if kind == "object":
            self.objects += 1
            counts, properties = self.key_counts, self.properties
            for key, sub in value.items():
                counts[key] = counts.get(key, 0) + 1
                shape = properties.get(key)
                if shape is None:
                    shape = properties[key] = _Shape()
                shape.add(sub)
        elif kind == "array":
            if self.items is None:
                self.items = _Shape()
            for sub in value:
                self.items.add(sub)

    def schema(self) -> dict[str, Any]:
        types = set(self.types)
        if {"integer", "number"} <= types:
            types.discard("integer")
        out: dict[str, Any] = {}
        if types:
            ordered = sorted(types)
            out["type"] = ordered[0] if len(ordered) == 1 else ordered
        if self.properties:
            out["properties"] = {k: s.schema() for k, s in self.properties.items()}
            out["required"] = [k for k, c in self.key_counts.items() if c == self.objects]
        if self.items is not None and self.items.types:
            out["items"] = self.items.schema()
        return out


def even_sample(records: Sequence[Any], size: int = SAMPLE_SIZE) -> Sequence[Any]:
    """At most `size` records spread evenly over `records` (all of them when fewer)."""
    if len(records) <= size:
        return records
    step = len(records) / size
    return [records[int(i * step)] for i in range(size)]


def infer_schema(records: Sequence[Any], *, sample_size: int = SAMPLE_SIZE) -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) describing one line (record) of the file."""
    shape = _Shape()
    for record in even_sample(records, sample_size):
        shape.add(record)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **shape.schema()}


def leaf_fields(schema: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths of the leaves a schema describes (`file.path`, `context.before[]`)."""
    out: list[str] = []
    for key, sub in schema.get("properties", {}).items():
        path = f"{prefix}{key}"
        if "properties" in sub:
            out.extend(leaf_fields(sub, path + "."))
        elif "items" in sub and "properties" in sub["items"]:
            out.extend(leaf_fields(sub["items"], path + "[]."))
        elif "items" in sub:
            out.append(path + "[]")
        else:
            out.append(path)
    return out


#: DuckDB matches column names ignoring ASCII case only (`ä` and `Ä` are two columns).
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def column_key(name: str) -> str:
    """`name` as DuckDB compares column names: two names with one key are one column."""
    return name.translate(_ASCII_LOWER)


def clashing_keys(keys: Iterable[str]) -> list[str]:
    """The record keys (distinct, first seen first) that cannot each be a column of their own:
    keys that differ only in case (`id`, `ID`: DuckDB's JSON reader renames the second `ID_1`,
    and SQL naming `"ID"` then reads `id`), and the empty key (which makes DuckDB read every
    record as one JSON column)."""
    groups: dict[str, list[str]] = {}
    for key in dict.fromkeys(keys):
        groups.setdefault(column_key(key), []).append(key)
    return [key for group in groups.values() for key in group if len(group) > 1 or not key]


def named_keys(keys: Sequence[str], *, most: int, chars: int) -> str:
    """`"id", "ID" and 3 more`: record keys named in a message, the first `most` of them, each
    clipped to `chars` (a backend's keys can be of any length)."""
    named = [json.dumps(clip_strings(key, chars)) for key in keys[:most]]
    more = f" and {len(keys) - len(named):,} more" if len(keys) > len(named) else ""
    return ", ".join(named) + more
