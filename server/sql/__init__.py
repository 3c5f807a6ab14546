"""Read-only SQL over saved datasets (`analyze-with-duckdb`): `Datasets` lists the datasets of
its sources and runs one untrusted statement over them in a sealed DuckDB connection
(`datasets`), each dataset a view (`views`); `answer_query` answers a query through the output
layer without holding its whole result (`answer`). Its errors are in `server.errors`."""

from server.sql.answer import answer_query
from server.sql.datasets import DatasetFilter, Datasets, QueryResult
from server.sql.views import DUCKDB_OBJECT_SIZE, json_field, quote_ident

__all__ = [
    "DUCKDB_OBJECT_SIZE",
    "DatasetFilter",
    "Datasets",
    "QueryResult",
    "answer_query",
    "json_field",
    "quote_ident",
]
