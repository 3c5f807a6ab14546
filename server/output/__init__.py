"""The large-result output layer shared by the search tools, the SQL tool and the proxy.

`OutputLayer.render(page, RenderOptions(...))` turns one page into a response that fits:
inline, file_ref (a JSONL file plus a descriptor), legacy, or stats. `OffloadStore` owns the
files, `DatasetStore` the proxy's saved results, `Datasets` the read-only SQL over both,
`apply_jq` the sandboxed jq filter and `estimate_tokens` the one size estimate everything uses.
"""

from server.output.dataset_store import DatasetStore, DatasetWriteError
from server.output.datasets import (
    DatasetFilter,
    DatasetInfo,
    Datasets,
    QueryResult,
    SqlExecutionError,
    SqlRejectedError,
    SqlResultTooLargeError,
    SqlTimeoutError,
)
from server.output.descriptor import JSONL_MIME_TYPE, LINES_URI, RESULTS_URI, FileRef
from server.output.jqfilter import JqFilterError, JqTimeoutError, apply_jq
from server.output.layer import OutputLayer, Rendered, RenderOptions
from server.output.modes import MIN_OUTPUT_TOKENS, OutputMode
from server.output.offload import (
    CleanupReport,
    DatasetNotFoundError,
    InvalidDatasetIdError,
    OffloadError,
    OffloadStore,
)
from server.output.pages import ListPage, PageView
from server.output.sources import DatasetFile, DatasetSource
from server.output.stats import compute_stats
from server.output.tokens import estimate_tokens

__all__ = [
    "JSONL_MIME_TYPE",
    "LINES_URI",
    "MIN_OUTPUT_TOKENS",
    "RESULTS_URI",
    "CleanupReport",
    "DatasetFile",
    "DatasetFilter",
    "DatasetInfo",
    "DatasetNotFoundError",
    "DatasetSource",
    "DatasetStore",
    "DatasetWriteError",
    "Datasets",
    "FileRef",
    "InvalidDatasetIdError",
    "JqFilterError",
    "JqTimeoutError",
    "ListPage",
    "OffloadError",
    "OffloadStore",
    "OutputLayer",
    "OutputMode",
    "PageView",
    "QueryResult",
    "RenderOptions",
    "Rendered",
    "SqlExecutionError",
    "SqlRejectedError",
    "SqlResultTooLargeError",
    "SqlTimeoutError",
    "apply_jq",
    "compute_stats",
    "estimate_tokens",
]
