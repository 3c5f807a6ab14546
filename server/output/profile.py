"""A dataset's profile: what its fields are and which values the few categorical ones take.

An agent handed a saved dataset instead of the data decides its next query from this alone,
so it answers the first questions an analyst asks: which columns exist and of what type
(mixed types shown as a union, e.g. `integer | string`, so a query casts instead of failing),
which are sometimes missing, what a record looks like, and how the rows split over
low-cardinality fields (status, type, level, ...), often the answer itself.

Cost matters because the proxy profiles a large result on the call path: types come from a
sample (`schema_sample_size`); distinct values are counted over every record, but only for the
fields whose sample already looks categorical, so an id or free-text column is never counted
in full. The sample is random (seeded, so a dataset always gets the same profile) rather than
evenly spread: tool output is often periodic (every third row a string, say), and an even
stride can land on the same phase every time and miss a type entirely.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from server.output.schema import infer_schema
from server.output.shrink import clip_strings

#: A field with more distinct values than this is not categorical.
MAX_DISTINCT = 20
#: At most this many categorical fields are reported, in record key order.
MAX_DISTINCT_FIELDS = 10
#: Longer strings are free text, never categories.
MAX_CATEGORY_CHARS = 100
SAMPLE_RECORDS = 3
SAMPLE_MAX_CHARS = 200
_SCALARS = frozenset({"string", "integer", "number", "boolean", "null"})
_SEED = 0x5EED


def sample(records: Sequence[Any], size: int) -> Sequence[Any]:
    """At most `size` records, chosen at random (seeded) but kept in their order."""
    if len(records) <= size:
        return records
    return [records[i] for i in sorted(random.Random(_SEED).sample(range(len(records)), size))]


@dataclass(frozen=True, slots=True)
class Profile:
    """`fields` maps each top-level field to its type (a ` | ` union when mixed); `optional`
    lists the fields some sampled records lack; `distinct_values` maps categorical fields to
    their values with counts, most frequent first."""

    fields: dict[str, str]
    optional: list[str]
    distinct_values: dict[str, list[dict[str, Any]]]
    sample_records: list[Any]
    sample_size: int

    def schema(self) -> dict[str, Any]:
        return {"fields": self.fields, "optional_fields": self.optional, "sampled_records": self.sample_size}


def _type_name(schema: dict[str, Any]) -> str:
    kind = schema.get("type", "null")
    return kind if isinstance(kind, str) else " | ".join(kind)


def _is_category(value: Any) -> bool:
    return value is None or type(value) in (bool, int, float) or (type(value) is str and len(value) <= MAX_CATEGORY_CHARS)


def _distinct(records: Sequence[dict[str, Any]], probe: Sequence[dict[str, Any]], name: str) -> list[dict[str, Any]] | None:
    """Value counts of `name` over all records, or None when it is not categorical."""
    seen = {r.get(name) for r in probe if _is_category(r.get(name))}
    if len(seen) > MAX_DISTINCT or any(not _is_category(r.get(name)) for r in probe):
        return None
    try:
        counts = Counter(r.get(name) for r in records)
    except TypeError:  # an unhashable value outside the sample: a list or object, not a category
        return None
    if len(counts) > MAX_DISTINCT or len(counts) >= len(records) or not all(map(_is_category, counts)):
        return None
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))
    return [{"value": value, "count": count} for value, count in ordered]


def profile_records(records: Sequence[dict[str, Any]], *, sample_size: int) -> Profile:
    """The profile of `records`, a list of JSON objects."""
    probe = sample(records, sample_size)
    schema = infer_schema(probe, sample_size=sample_size)
    properties: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    fields = {name: _type_name(sub) for name, sub in properties.items()}
    distinct: dict[str, list[dict[str, Any]]] = {}
    for name, sub in properties.items():
        if len(distinct) == MAX_DISTINCT_FIELDS:
            break
        kinds = sub.get("type", "null")
        if set([kinds] if isinstance(kinds, str) else kinds) <= _SCALARS:
            values = _distinct(records, probe, name)
            if values is not None:
                distinct[name] = values
    return Profile(
        fields=fields,
        optional=[name for name in properties if name not in required],
        distinct_values=distinct,
        sample_records=[clip_strings(r, SAMPLE_MAX_CHARS) for r in records[:SAMPLE_RECORDS]],
        sample_size=len(probe),
    )
