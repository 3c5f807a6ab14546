"""The large-result output layer shared by the search tools, the SQL tool and the proxy.

`OutputLayer.render(page, RenderOptions(...))` turns one page into a response that fits:
inline, file_ref (a JSONL file plus a descriptor), legacy, or stats. `OffloadStore` and
`DatasetStore` are the two kinds of `FileStore` (offloaded pages; the proxy's saved results),
`Datasets` the read-only SQL over both, `apply_jq` the sandboxed jq filter, `estimate_tokens`
the one size estimate everything uses. This is the package's public surface: the proxy and the
tools import from here, never from its modules. Its errors are in `server.errors`.
"""

from server.output.dataset_store import DatasetStore, SavedDataset
from server.output.datasets import DatasetFilter, Datasets, QueryResult, answer_query
from server.output.descriptor import JSONL_MIME_TYPE, LINES_URI, RESULTS_URI
from server.output.files import DatasetFile, quote_ident
from server.output.fit import clip_strings, largest_fitting, omitted_fields_note, project, shrink_to_fit
from server.output.jqfilter import apply_jq
from server.output.jsontext import CHARS_PER_TOKEN, byte_size, dumps, dumps_bytes, estimate_tokens
from server.output.layer import (
    MIN_OUTPUT_TOKENS,
    Ceiling,
    ListPage,
    OutputLayer,
    OutputMode,
    PageView,
    Rendered,
    RenderOptions,
)
from server.output.offload import OffloadStore
from server.output.schema import Profile, as_object, profile_records

__all__ = [
    "CHARS_PER_TOKEN",
    "JSONL_MIME_TYPE",
    "LINES_URI",
    "MIN_OUTPUT_TOKENS",
    "RESULTS_URI",
    "Ceiling",
    "DatasetFile",
    "DatasetFilter",
    "DatasetStore",
    "Datasets",
    "ListPage",
    "OffloadStore",
    "OutputLayer",
    "OutputMode",
    "PageView",
    "Profile",
    "QueryResult",
    "RenderOptions",
    "Rendered",
    "SavedDataset",
    "answer_query",
    "apply_jq",
    "as_object",
    "byte_size",
    "clip_strings",
    "dumps",
    "dumps_bytes",
    "estimate_tokens",
    "largest_fitting",
    "omitted_fields_note",
    "profile_records",
    "project",
    "quote_ident",
    "shrink_to_fit",
]
