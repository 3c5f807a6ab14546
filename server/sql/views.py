"""A dataset file as a DuckDB view: the SELECT that reads its records, and SQL quoting.

One view shape serves every kind of dataset, so SQL, DESCRIBE and the example queries the
proxy writes see the same columns: an offloaded page's header line is filtered out, only the
records' own keys become columns, and column types the producer knows are declared rather
than inferred. Records whose keys cannot each be a column (`clashing_keys`) are read as one
JSON column, `value`, instead, and their keys through JSON Pointers (`json_field`).
"""

from __future__ import annotations

from server.output import HEADER_TYPE, DatasetFile, clashing_keys

#: DuckDB's default `maximum_object_size` for read_json.
DUCKDB_OBJECT_SIZE = 16 * 1024 * 1024


def json_field(name: str) -> str:
    """SQL reading the key `name` of a JSON column `value` as text: a JSON Pointer, which names
    any key exactly (case, `/`, `~`, quotes and the empty key alike)."""
    return "value->>" + quote_literal("/" + name.replace("~", "~0").replace("/", "~1"))


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def view_sql(file: DatasetFile) -> str:
    """SELECT over the file's records only, in the records' own key order. Every key is a
    column however many there are (DuckDB would otherwise read records of over 200 keys as
    one MAP column, leaving nothing for DESCRIBE to show and no column to select), except
    when they cannot all be columns (`DatasetFile.as_json`, `clashing_keys`): then each record
    is one JSON column, `value`."""
    path = quote_literal(str(file.path))
    if not file.count:
        return "SELECT NULL AS empty WHERE false"
    # DuckDB refuses a record over 16 MB unless told a larger bound.
    big = file.max_record_bytes >= DUCKDB_OBJECT_SIZE
    size = f", maximum_object_size={file.max_record_bytes + 1}" if big else ""
    objects = f"SELECT json AS value FROM read_json_objects({path}, format='newline_delimited'{size})"
    if file.as_json:
        return objects
    if file.columns:
        types = ", ".join(f"{quote_literal(name)}: {quote_literal(kind)}" for name, kind in file.columns)
        return f"SELECT * FROM read_json({path}, format='newline_delimited', columns={{{types}}}{size})"
    source = f"read_json({path}, format='newline_delimited', sample_size=-1, map_inference_threshold=-1{size})"
    if not file.header:
        return f"SELECT * FROM {source}"
    not_header = f"IS DISTINCT FROM {quote_literal(HEADER_TYPE)}"
    # One JSON column `value` when the records are not objects, or when their keys cannot all
    # be columns beside the header's (`Type` beside the header's `type` would read NULL).
    if not file.record_keys or clashing_keys([*file.header_keys, *file.record_keys]):
        return f"{objects} WHERE json_extract_string(json, '$.type') {not_header}"
    return f'SELECT {", ".join(map(quote_ident, file.record_keys))} FROM {source} WHERE "type" {not_header}'
