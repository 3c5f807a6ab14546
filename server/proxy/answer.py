"""What the client gets instead of a result that was too large: a compact answer.

The answer must let an agent carry on without ever seeing the data: what was saved and where,
how big it was, which fields it has and how the rows split over categorical ones, and SQL it
can run as is (the real table name filled in). It travels as structuredContent and as the
same JSON in a text block (clients differ in which they show).

When the dataset cannot be written, the answer is the start of the result instead, cut to fit
under the threshold, with a warning saying why; the call never fails because of the proxy.

Both answers carry `"intercepted"` (`saved_as_dataset` or `truncated`), so a client can tell
them from the backend's own output at a glance.
"""

from __future__ import annotations

import re
from typing import Any

from server.output.dataset_store import SavedDataset
from server.output.profile import Profile
from server.output.shrink import shrink_to_fit
from server.output.sources import quote_ident
from server.proxy.extraction import Extracted

SAVED = "saved_as_dataset"
TRUNCATED = "truncated"
#: The envelope around nested records is kept small: it is context, not data.
_ENVELOPE_TOKENS, _ENVELOPE_BYTES = 400, 3000
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
_NUMERIC = ("integer", "number")


def example_sql(table: str, extracted: Extracted, profile: Profile) -> list[str]:
    """Queries that run as they are on this dataset, from the general to the specific."""
    queries = [f"SELECT * FROM {table} LIMIT 20"]
    if extracted.format == "text_lines":
        texts = [str(r.get("text", "")) for r in profile.sample_records]
        word = next((m.group(0) for t in texts for m in _WORD.finditer(t)), "error")
        queries.append(f"SELECT line, text FROM {table} WHERE text ILIKE '%{word}%' ORDER BY line LIMIT 50")
        queries.append(f"SELECT count(*) AS lines, max(length(text)) AS longest FROM {table}")
        return queries
    queries.append(f"DESCRIBE {table}")
    for name in list(profile.distinct_values)[:2]:
        column = quote_ident(name)
        queries.append(f"SELECT {column}, count(*) AS n FROM {table} GROUP BY {column} ORDER BY n DESC")
    numeric = next((n for n, t in profile.fields.items() if t in _NUMERIC), None)
    if numeric is not None:
        column = quote_ident(numeric)
        queries.append(f"SELECT min({column}) AS min, max({column}) AS max, avg({column}) AS avg FROM {table}")
    return queries


def saved_answer(
    saved: SavedDataset,
    extracted: Extracted,
    profile: Profile,
    *,
    tool: str,
    server: str,
    size_bytes: int,
    threshold_tokens: int,
    retention_days: float,
) -> dict[str, Any]:
    table = f"dataset_{saved.id}"
    count = len(extracted.records)
    kind = "JSON records" if extracted.format == "json_records" else "lines of text"
    dataset: dict[str, Any] = {
        "id": saved.id,
        "table": table,
        "tool": tool,
        "server": server,
        "format": extracted.format,
        "records_from": extracted.records_from,
        "record_count": count,
        "original_size_bytes": size_bytes,
        "estimated_tokens": size_bytes // 3,
        "fields": profile.fields,
        "optional_fields": profile.optional,
        "distinct_values": profile.distinct_values,
        "sample_records": profile.sample_records,
    }
    if extracted.envelope is not None:
        dataset["envelope"] = shrink_to_fit(extracted.envelope, _ENVELOPE_TOKENS, _ENVELOPE_BYTES)[0]
    dataset.update(data_path=str(saved.data_path), metadata_path=str(saved.metadata_path))
    return {
        "intercepted": SAVED,
        "message": (
            f"{tool} ({server}) returned about {size_bytes // 3:,} tokens, over the proxy's "
            f"{threshold_tokens:,}-token limit, so the result was saved as dataset {saved.id} "
            f"({count:,} {kind}) instead of being sent."
        ),
        "dataset": dataset,
        "example_sql": example_sql(table, extracted, profile),
        "next_steps": (
            f"Query it with analyze-with-duckdb (query = SQL over table {table}, e.g. one of example_sql; "
            f"or pass dataset_id={saved.id} and use the table name `dataset`). Page through the records "
            f"with read-dataset-page(dataset_id={saved.id}). Or read data_path (JSON Lines, one record per "
            f"line) with your own tools. Datasets are kept {retention_days:g} days; list-saved-datasets lists them."
        ),
    }


def truncated_answer(text: str, *, tool: str, server: str, size_bytes: int, threshold_tokens: int, why: str) -> dict[str, Any]:
    """The start of the result, cut to about `threshold_tokens`, with a warning saying why."""
    budget = max(threshold_tokens * 3 - 1024, 256)
    head = text.encode("utf-8")[:budget].decode("utf-8", "ignore")
    return {
        "intercepted": TRUNCATED,
        "message": (
            f"{tool} ({server}) returned about {size_bytes // 3:,} tokens, over the proxy's {threshold_tokens:,}-token limit."
        ),
        "warning": (
            f"the result could not be saved as a dataset ({why}), so this is only its first "
            f"{len(head):,} of {len(text):,} characters; narrow the call to get the rest"
        ),
        "original_size_bytes": size_bytes,
        "estimated_tokens": size_bytes // 3,
        "text": head,
    }
