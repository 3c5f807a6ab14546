"""A dataset file as a DuckDB view: the SELECT that reads its records, and SQL quoting.

One view shape serves every kind of dataset, so SQL, DESCRIBE and the example queries the
proxy writes see the same columns: an offloaded page's header line is filtered out, only the
records' own keys become columns, and column types the producer knows are declared rather
than inferred.
"""

from __future__ import annotations

from server.output import HEADER_TYPE, DatasetFile

#: DuckDB's default `maximum_object_size` for read_json.
DUCKDB_OBJECT_SIZE = 16 * 1024 * 1024


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def view_sql(file: DatasetFile) -> str:
    """SELECT over the file's records only, in the records' own key order. Every key is a
    column however many there are (DuckDB would otherwise read records of over 200 keys as
    one MAP column, leaving nothing for DESCRIBE to show and no column to select)."""
    path = quote_literal(str(file.path))
    if not file.count:
        return "SELECT NULL AS empty WHERE false"
    # DuckDB refuses a record over 16 MB unless told a larger bound.
    big = file.max_record_bytes >= DUCKDB_OBJECT_SIZE
    size = f", maximum_object_size={file.max_record_bytes + 1}" if big else ""
    if file.columns:
        types = ", ".join(f"{quote_literal(name)}: {quote_literal(kind)}" for name, kind in file.columns)
        return f"SELECT * FROM read_json({path}, format='newline_delimited', columns={{{types}}}{size})"
    source = f"read_json({path}, format='newline_delimited', sample_size=-1, map_inference_threshold=-1{size})"
    if not file.header:
        return f"SELECT * FROM {source}"
    not_header = f"IS DISTINCT FROM {quote_literal(HEADER_TYPE)}"
    if not file.record_keys:  # the records are not objects: one JSON column `value`
        return (
            f"SELECT json AS value FROM read_json_objects({path}, format='newline_delimited') "
            f"WHERE json_extract_string(json, '$.type') {not_header}"
        )
    return f'SELECT {", ".join(map(quote_ident, file.record_keys))} FROM {source} WHERE "type" {not_header}'
