"""What the client gets instead of a result that was too large: a compact answer.

The answer must let an agent carry on without ever seeing the data: what was saved and where,
how big it was, which fields it has and how the rows split over categorical ones, and SQL it
can run as is (the real table name filled in). It travels as structuredContent and as the
same JSON in a text block (clients differ in which they show), so both copies count against
its budget: half the threshold (`answer_budget`), by the output layer's one token estimate.
Records can have thousands of fields, so the answer describes as many as fit and says where
the rest are: `server.output.describe`, the one descriptor builder (a file_ref's too), chooses
them; this module lays them out with SQL.

When the dataset cannot be written, the answer is the start of the result instead, cut so the
whole answer (both copies, JSON escaping included) fits the threshold, with a warning saying
why; the call never fails because of the proxy.

Both answers carry `"intercepted"` (`saved_as_dataset` or `truncated`), so a client can tell
them from the backend's own output at a glance.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

from fastmcp.tools.base import ToolResult

from server.json_result import json_result
from server.output import (
    CHARS_PER_TOKEN,
    Shown,
    clip_strings,
    dataset_view,
    describe,
    dumps_bytes,
    largest_fitting,
    named_keys,
    shrink_to_fit,
)
from server.proxy.dataset_store import SavedDataset
from server.proxy.extraction import Extracted
from server.proxy.profile import Profile
from server.proxy.size import Size, sent_size
from server.sql import json_field, quote_ident

SAVED = "saved_as_dataset"
TRUNCATED = "truncated"
#: The envelope around nested records is kept small: it is context, not data.
_ENVELOPE_TOKENS, _ENVELOPE_BYTES = 400, 3000
_ENVELOPE_NOTE = "<too large to show: see the metadata file (metadata_path)>"
#: Names that come from the backend (tool, server, the records' key path) are clipped to this.
_NAME_CHARS = 200
#: The search word in the example SQL for text: a prefix matches wherever the word does.
_WORD_CHARS = 40
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
_NUMERIC = ("integer", "number")
#: The clashing keys named in the answer; the rest are counted.
_CLASHES_SHOWN = 5
#: The column name of the empty key's values in example SQL (SQL names cannot be empty).
_EMPTY_KEY = "(empty key)"


def example_sql(table: str, extracted: Extracted, profile: Profile) -> list[str]:
    """Queries that run as they are on this dataset, from the general to the specific. Keys
    that cannot all be columns (`profile.clashes`) are read from the JSON column `value`."""
    queries = [f"SELECT * FROM {table} LIMIT 20"]
    if extracted.format == "text_lines":
        texts = [str(r.get("text", "")) for r in profile.sample_records]
        word = next((m.group(0)[:_WORD_CHARS] for t in texts for m in _WORD.finditer(t)), "error")
        queries.append(f"SELECT line, text FROM {table} WHERE text ILIKE '%{word}%' ORDER BY line LIMIT 50")
        queries.append(f"SELECT count(*) AS lines, max(length(text)) AS longest FROM {table}")
        return queries
    if profile.clashes:
        queries.append(f"SELECT DISTINCT unnest(json_keys(value)) AS key FROM {table}")
    else:
        queries.append(f"DESCRIBE {table}")
    column = json_field if profile.clashes else quote_ident
    for name in list(profile.distinct_values)[:2]:
        # a JSON field is named after its key; the empty key cannot name a column
        shown = f"{column(name)} AS {quote_ident(name or _EMPTY_KEY)}" if profile.clashes else column(name)
        queries.append(f"SELECT {shown}, count(*) AS n FROM {table} GROUP BY {column(name)} ORDER BY n DESC")
    numeric = next((n for n, t in profile.fields.items() if t in _NUMERIC), None)
    if numeric is not None:
        value = f"({column(numeric)})::DOUBLE" if profile.clashes else column(numeric)
        queries.append(f"SELECT min({value}) AS min, max({value}) AS max, avg({value}) AS avg FROM {table}")
    return queries


def _clash_note(clashes: Sequence[str], *, full: bool) -> str:
    """Why a dataset's records are one JSON column, and how to read a key of it; the keys are
    only counted in the floor answer."""
    why = "SQL names ignore case, and cannot be empty"
    if not full:
        count = f"{len(clashes):,} of the records' keys"
        return f"{count} cannot each be an SQL column ({why}): each record is one JSON column, value"
    shortest = min(clashes, key=len)
    example = json_field(shortest if len(shortest) <= _NAME_CHARS else "KEY")
    return (
        f"the records' keys {named_keys(clashes, most=_CLASHES_SHOWN, chars=_NAME_CHARS)} cannot each be an SQL "
        f"column ({why}), so each record is one JSON column, value: read a key with a JSON Pointer, e.g. "
        f"{example} (text; cast it, e.g. ({example})::DOUBLE), as example_sql does"
    )


def _profile_of(profile: Profile, shown: Shown) -> Profile:
    """`profile` covering only the fields an answer has room for (`shown`)."""
    kept = set(shown.names)
    return Profile(
        fields={n: profile.fields[n] for n in shown.names},
        optional=[n for n in profile.optional if n in kept],
        distinct_values={n: v for n, v in profile.distinct_values.items() if n in kept},
        sample_records=shown.sample,
        sample_size=profile.sample_size,
        clashes=profile.clashes,
    )


def _envelope(extracted: Extracted) -> Any:
    """The envelope, shrunk; a note instead when it cannot be (an object of many short members)."""
    envelope = shrink_to_fit(extracted.envelope, _ENVELOPE_TOKENS, _ENVELOPE_BYTES)[0]
    return envelope if len(dumps_bytes(envelope)) <= _ENVELOPE_BYTES else _ENVELOPE_NOTE


def saved_answer(
    saved: SavedDataset,
    extracted: Extracted,
    profile: Profile,
    *,
    tool: str,
    server: str,
    size: Size,
    threshold_tokens: int,
    retention_days: float,
) -> ToolResult:
    """The compact answer, within `answer_budget(threshold_tokens)` tokens (text and
    structuredContent together). It describes the first `k` fields, `k` the most that fit
    (`describe`), and points to the rest; when not even the id, counts and paths fit with the
    envelope, the message and the next steps, a floor of just those (id, table, record count,
    example SQL, paths: about 1 KB a copy with data paths of ordinary length) is sent, which
    fits any threshold from about 1,000 tokens up (the default is 8,192)."""
    table = dataset_view(saved.id)
    count = len(extracted.records)
    estimated = size.tokens
    tool, server = clip_strings(tool, _NAME_CHARS), clip_strings(server, _NAME_CHARS)
    envelope = _envelope(extracted) if extracted.envelope is not None else None
    kind = "JSON records" if extracted.format == "json_records" else "lines of text"
    listing = f"SELECT DISTINCT unnest(json_keys(value)) FROM {table}" if profile.clashes else f"DESCRIBE {table}"
    everything = f"the metadata file (metadata_path), or {listing} via analyze-with-duckdb"

    def render(shown: Shown, *, full: bool = True) -> ToolResult:
        part = _profile_of(profile, shown)
        dataset: dict[str, Any] = {
            "id": saved.id,
            "table": table,
            "tool": tool,
            "server": server,
            "format": extracted.format,
            "records_from": clip_strings(extracted.records_from, _NAME_CHARS),
            "record_count": count,
            "original_size_bytes": size.bytes,
            "estimated_tokens": estimated,
        }
        if full:
            dataset["fields"] = part.fields
            if shown.more:
                dataset["more_fields"] = shown.more
            dataset.update(
                optional_fields=part.optional,
                distinct_values=part.distinct_values,
                sample_records=part.sample_records,
            )
            if envelope is not None:
                dataset["envelope"] = envelope
        if profile.clashes:
            dataset["sql_columns"] = _clash_note(profile.clashes, full=full)
        dataset.update(data_path=str(saved.data_path), metadata_path=str(saved.metadata_path))
        answer: dict[str, Any] = {
            "intercepted": SAVED,
            "message": (
                f"{tool} ({server}) returned about {estimated:,} tokens, over the proxy's "
                f"{threshold_tokens:,}-token limit, so the result was saved as dataset {saved.id} "
                f"({count:,} {kind}) instead of being sent."
            ),
            "dataset": dataset,
            "example_sql": example_sql(table, extracted, part),
        }
        answer["next_steps"] = (
            f"Query it with analyze-with-duckdb (query = SQL over table {table}, e.g. one of example_sql; "
            f"or pass dataset_id={saved.id} and use the table name `dataset`). Page through the records "
            f"with read-dataset-page(dataset_id={saved.id}). Or read data_path (JSON Lines, one record per "
            f"line) with your own tools. Datasets are kept {retention_days:g} days; list-saved-datasets lists them."
            if full
            else f"Fields, types and values: {everything}. Records: read-dataset-page(dataset_id={saved.id})."
        )
        return json_result(answer)

    budget = answer_budget(threshold_tokens)
    return describe(
        list(profile.fields),
        profile.sample_records,
        everything=everything,
        render=render,
        fits=lambda result: sent_size(result).tokens <= budget,
        floor=functools.partial(render, full=False),
    )


def answer_budget(threshold_tokens: int) -> int:
    """Tokens the saved answer may take, text and structuredContent together: half the
    threshold, so that however a client shows it, it stays well under what the proxy itself
    would have intercepted."""
    return threshold_tokens // 2


def truncated_answer(text: str, *, tool: str, server: str, size: Size, threshold_tokens: int, why: str) -> ToolResult:
    """The longest start of the result whose whole answer (text and structuredContent together,
    escaping included) fits in `threshold_tokens`, with a warning saying why."""
    estimated = size.tokens
    tool, server = clip_strings(tool, _NAME_CHARS), clip_strings(server, _NAME_CHARS)

    def build(n: int) -> ToolResult:
        return json_result(
            {
                "intercepted": TRUNCATED,
                "message": (
                    f"{tool} ({server}) returned about {estimated:,} tokens, over the proxy's "
                    f"{threshold_tokens:,}-token limit."
                ),
                "warning": (
                    f"the result could not be saved as a dataset ({why}), so this is only its first "
                    f"{n:,} of {len(text):,} characters; narrow the call to get the rest"
                ),
                "original_size_bytes": size.bytes,
                "estimated_tokens": estimated,
                "text": text[:n],
            }
        )

    # Every character is at least a quarter token, so no longer start than this can fit.
    most = min(len(text), threshold_tokens * CHARS_PER_TOKEN)
    return largest_fitting(build, most, lambda result: sent_size(result).tokens <= threshold_tokens)[0]
