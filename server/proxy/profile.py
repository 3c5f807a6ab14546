"""A saved dataset's profile (`profile_records`): what an agent handed a saved dataset
instead of the data decides its next query from, so it answers the first questions an analyst asks: which columns
exist and of what type (mixed types shown as a union, e.g. `integer | string`, so a query casts
instead of failing), which are sometimes missing, what a record looks like, and how the rows
split over low-cardinality fields (status, type, level, ...), often the answer itself.
The proxy profiles a large result on the call path, so types come from a sample
(`schema_sample_size`); distinct values are counted over every record, but only for the fields
whose sample already looks categorical, so an id or free-text column is never counted in full.
That sample is random (seeded, so a dataset always gets the same profile) rather than evenly
spread: tool output is often periodic (every third row a string, say), and an even stride can
land on the same phase every time and miss a type entirely.
Keys are the exception to sampling: whether they can all be SQL columns (`clashes`) is
decided over every record, as DuckDB reads every record, since a single record with `ID`
beside `id` would make `"ID"` read `id` (`_every_key`: one C decode a record).
"""

from __future__ import annotations

import random
import re
import types
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from server.output import SAMPLE_MAX_CHARS, clashing_keys, clip_strings, infer_schema
from server.proxy.extraction import as_object

#: A field with more distinct values than this is not categorical.
MAX_DISTINCT = 20
#: At most this many categorical fields are reported, in record key order.
MAX_DISTINCT_FIELDS = 10
#: Longer strings are free text, never categories.
MAX_CATEGORY_CHARS = 100
SAMPLE_RECORDS = 3
_SCALARS = frozenset({"string", "integer", "number", "boolean", "null"})
_SEED = 0x5EED


def random_sample(records: Sequence[Any], size: int) -> Sequence[Any]:
    """At most `size` records, chosen at random (seeded) but kept in their order."""
    if len(records) <= size:
        return records
    return [records[i] for i in sorted(random.Random(_SEED).sample(range(len(records)), size))]


@dataclass(frozen=True, slots=True)
class Profile:
    """`fields` maps each top-level field to its type (a ` | ` union when mixed); `optional`
    lists the fields some sampled records lack; `distinct_values` maps categorical fields to
    their values with counts, most frequent first; `clashes` lists the keys, in any record,
    that cannot each be a column (`server.output.clashing_keys`): SQL then reads each record as
    one JSON column."""

    fields: dict[str, str]
    optional: list[str]
    distinct_values: dict[str, list[dict[str, Any]]]
    sample_records: list[Any]
    sample_size: int
    clashes: list[str] = field(default_factory=list)

    def schema(self) -> dict[str, Any]:
        return {"fields": self.fields, "optional_fields": self.optional, "sampled_records": self.sample_size}


def _type_name(schema: dict[str, Any]) -> str:
    kind = schema.get("type", "null")
    return kind if isinstance(kind, str) else " | ".join(kind)


def _is_category(value: Any) -> bool:
    return (
        value is None or type(value) in (bool, int, float) or (type(value) is str and len(value) <= MAX_CATEGORY_CHARS)
    )


def _columns(records: Sequence[Any], names: list[str]) -> dict[str, list[Any]]:
    """Every record's values of the fields `names` (None where missing). Raw records are decoded,
    in one C call, into structs of just those fields: msgspec skips the other fields without
    building them."""
    idents = [f"f{i}" for i in range(len(names))]
    struct = msgspec.defstruct(
        "Columns", [(i, Any, None) for i in idents], rename=dict(zip(idents, names, strict=True))
    )
    if records and all(type(r) is msgspec.Raw for r in records):
        # list[struct], spelt as what that evaluates to: a type made at run time by defstruct
        # cannot be a type argument for a checker
        list_of_structs = types.GenericAlias(list, (struct,))
        rows = msgspec.json.Decoder(list_of_structs).decode(b"[" + b",".join(records) + b"]")
    else:
        rows = [
            msgspec.json.decode(r, type=struct) if type(r) is msgspec.Raw else struct(*map(r.get, names))
            for r in records
        ]
    return {name: [getattr(row, i) for row in rows] for i, name in zip(idents, names, strict=True)}


def _kind(value: Any) -> tuple[bool, Any]:
    """`value` as a counting key: Python counts `True` as `1` (and `False` as `0`), SQL and
    JSON do not. `1` and `1.0` stay one value, as in a DuckDB column of numbers."""
    return type(value) is bool, value


def _counts(values: list[Any]) -> list[dict[str, Any]] | None:
    """Value counts, most frequent first, or None when `values` are not categorical."""
    try:
        counts = Counter(map(_kind, values))
    except TypeError:  # an unhashable value outside the sample: a list or object, not a category
        return None
    if len(counts) > MAX_DISTINCT or len(counts) >= len(values) or not all(_is_category(v) for _, v in counts):
        return None
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0][1])))
    return [{"value": value, "count": count} for (_, value), count in ordered]


_KEYS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_NULL = msgspec.Raw(b"null")
#: The struct of known keys is remade at most this many times (records bringing ever new keys
#: would remake it for each record), and only for at most this many keys (a struct decode
#: makes every field, present or not, and finds a field by a linear scan: past ~32 fields a
#: record of few keys decodes slower than into a dict); past either, keys are decoded as dicts.
_REMAKES, _STRUCT_KEYS = 16, 32
#: What msgspec refuses in a field's name.
_UNNAMEABLE = re.compile(r'["\\\x00-\x1f]')


def _known_keys(keys: Sequence[str]) -> Callable[[msgspec.Raw], object] | None:
    """A decoder of records holding only `keys` (values left raw) that refuses any other key:
    ~2x as fast as decoding a record's keys into a dict, which it spares most records. None
    for keys a struct cannot have or would be slow with."""
    if len(keys) > _STRUCT_KEYS or any(map(_UNNAMEABLE.search, keys)):
        return None
    idents = [f"f{i}" for i in range(len(keys))]
    try:
        struct = msgspec.defstruct(
            "Keys",
            [(i, msgspec.Raw, _NULL) for i in idents],
            rename=dict(zip(idents, keys, strict=True)),
            forbid_unknown_fields=True,
            gc=False,
        )
    except ValueError:  # a name msgspec refuses beyond `_UNNAMEABLE` (a lone surrogate)
        return None
    return msgspec.json.Decoder(struct).decode


def _every_key(records: Sequence[Any], known: Sequence[str]) -> dict[str, None]:
    """Every top-level key of `records`, those `known` (the sample's) first, then in the order
    seen; a record with no other key than those already seen costs one decode that builds no
    dict."""
    keys = dict.fromkeys(known)
    decode, remakes = _known_keys(known), 0
    for record in records:
        if type(record) is msgspec.Raw:
            if decode is not None:
                try:
                    decode(record)
                    continue
                except msgspec.ValidationError:  # a key not seen yet
                    pass
            record = _KEYS.decode(record)
        if keys.keys() >= record.keys():
            continue
        keys.update(dict.fromkeys(record))
        remakes += 1
        decode = _known_keys(list(keys)) if remakes <= _REMAKES else None
    return keys


def _looks_categorical(probe: Sequence[dict[str, Any]], name: str, schema: dict[str, Any]) -> bool:
    kinds = schema.get("type", "null")
    if not set([kinds] if isinstance(kinds, str) else kinds) <= _SCALARS:
        return False
    values = [r.get(name) for r in probe]
    return all(map(_is_category, values)) and len(set(map(_kind, values))) <= MAX_DISTINCT


def profile_records(records: Sequence[Any], *, sample_size: int) -> Profile:
    """The profile of `records`, JSON objects as dicts or raw JSON."""
    probe = [as_object(r) for r in random_sample(records, sample_size)]
    schema = infer_schema(probe, sample_size=sample_size)
    properties: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    candidates = [n for n, sub in properties.items() if _looks_categorical(probe, n, sub)][:MAX_DISTINCT_FIELDS]
    columns = _columns(records, candidates) if candidates else {}
    distinct = {n: counted for n, values in columns.items() if (counted := _counts(values)) is not None}
    return Profile(
        fields={name: _type_name(sub) for name, sub in properties.items()},
        optional=[name for name in properties if name not in required],
        distinct_values=distinct,
        sample_records=[clip_strings(as_object(r), SAMPLE_MAX_CHARS) for r in records[:SAMPLE_RECORDS]],
        sample_size=len(probe),
        clashes=clashing_keys(_every_key(records, list(properties))),
    )
