"""The large-result output layer shared by the search tools, the SQL tool and the proxy.

`OutputLayer.render(page, PageOptions(...), Layout(...))` turns one page, with the options the
agent chose for it and its tool's layout, into a response that fits:
inline, file_ref (a JSONL file plus a descriptor), legacy, or stats. `FileStore` is the one
store of every file codepager writes; `OffloadStore` (offloaded pages) is its kind here, the
proxy's saved datasets another, and `DatasetFile` is what any of them is to its readers (SQL,
paging). `estimate_tokens` is the one size estimate everything uses. This is the package's
public surface: the SQL package, the proxy and the tools import from here, never from its
modules. Its errors are in `server.errors`.
"""

from server.output.descriptor import JSONL_MIME_TYPE, Shown, describe
from server.output.files import (
    HEADER_TYPE,
    ULID_PATTERN,
    DatasetFile,
    DatasetInfo,
    DatasetSource,
    FileStore,
    check_id,
    dataset_view,
    iso_timestamp,
    scandir,
)
from server.output.fit import clip_strings, largest_fitting, shrink_to_fit
from server.output.jsontext import (
    CHARS_PER_TOKEN,
    MAX_ANSWER_BYTES,
    byte_size,
    dumps,
    dumps_bytes,
    dumps_lines,
    estimate_tokens,
)
from server.output.layer import (
    MIN_OUTPUT_TOKENS,
    Ceiling,
    Layout,
    ListPage,
    OutputLayer,
    OutputMode,
    PageOptions,
    PageView,
    Rendered,
    select_mode,
)
from server.output.list_dataset import WholeList
from server.output.offload import LINES_URI, RESULTS_URI, OffloadStore
from server.output.rows import MAX_RESULT_BYTES, BoundedRows, Row
from server.output.schema import SAMPLE_MAX_CHARS, clashing_keys, column_key, infer_schema, named_keys

__all__ = [
    "CHARS_PER_TOKEN",
    "HEADER_TYPE",
    "JSONL_MIME_TYPE",
    "LINES_URI",
    "MAX_ANSWER_BYTES",
    "MAX_RESULT_BYTES",
    "MIN_OUTPUT_TOKENS",
    "RESULTS_URI",
    "SAMPLE_MAX_CHARS",
    "ULID_PATTERN",
    "BoundedRows",
    "Ceiling",
    "DatasetFile",
    "DatasetInfo",
    "DatasetSource",
    "FileStore",
    "Layout",
    "ListPage",
    "OffloadStore",
    "OutputLayer",
    "OutputMode",
    "PageOptions",
    "PageView",
    "Rendered",
    "Row",
    "Shown",
    "WholeList",
    "byte_size",
    "check_id",
    "clashing_keys",
    "clip_strings",
    "column_key",
    "dataset_view",
    "describe",
    "dumps",
    "dumps_bytes",
    "dumps_lines",
    "estimate_tokens",
    "infer_schema",
    "iso_timestamp",
    "largest_fitting",
    "named_keys",
    "scandir",
    "select_mode",
    "shrink_to_fit",
]
