"""`read-dataset-page`: page through any saved dataset with sealed cursors, like a search.

For clients without a shell, or behind streamable HTTP, a dataset's file is out of reach;
this tool walks its records instead. The cursor is the search cursor's codec with
`kind="dataset"`: it names the dataset and the offset and is sealed (authenticated before it is
read, so a forged one costs nothing to refuse), so a cursor edited to point elsewhere, one from
a search, or one sent with another `dataset_id` is refused as invalid params (-32602), and a
cursor needs no server memory (datasets are immutable files, so there is no session to keep).
Each page is rendered inline and cut, losslessly, to the size budget: the next cursor resumes
at the first record left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, overload

import anyio
from fastmcp import FastMCP
from fastmcp.tools.base import ToolResult
from pydantic import Field

from server.output import (
    MIN_OUTPUT_TOKENS,
    DatasetFile,
    Layout,
    ListPage,
    OutputLayer,
    OutputMode,
    PageOptions,
    dataset_view,
)
from server.rendering import tool_result
from server.sql import Datasets
from server.tools.bounds import PathText
from server.tools.descriptions import READ_ONLY, READ_PAGE_DESCRIPTION
from server.tools.registry import mcp_tool
from server.tools.schemas import ROWS_OUTPUT
from sessions import CursorCodec, CursorGenerationError, CursorParamsMismatchError, CursorState

DATASET_KIND = "dataset"
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000


class _Window(Sequence[Any]):
    """`total` records of which only `records` (starting at `start`) were read: ListPage can
    slice the window and count the whole dataset without reading the rest of the file."""

    def __init__(self, start: int, records: list[Any], total: int) -> None:
        self.start, self.records, self.total = start, records, total

    def __len__(self) -> int:
        return self.total

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            start, stop, _ = index.indices(self.total)
            return self.records[max(start - self.start, 0) : max(stop - self.start, 0)]
        return self.records[index - self.start]


def dataset_page(
    datasets: Datasets, codec: CursorCodec, dataset_id: str, cursor: str | None, page_size: int | None
) -> ListPage:
    """The page of `dataset_id` at `cursor` (or its first page); raises CursorError on a cursor
    that is not one of ours for this dataset."""
    offset, size = 0, page_size or DEFAULT_PAGE_SIZE
    state = codec.decode(cursor, kind=DATASET_KIND) if cursor is not None else None
    if state is not None and state.session_id != dataset_id:
        raise CursorParamsMismatchError("dataset_id")
    file: DatasetFile = datasets.open(dataset_id)
    if state is not None:
        if state.total_count != file.count:
            raise CursorGenerationError(f"dataset {dataset_id} now has {file.count} records, not {state.total_count}")
        offset, size = state.offset, page_size or state.page_size

    def cursor_for(next_offset: int) -> str:
        return codec.encode(CursorState(dataset_id, next_offset, size, kind=DATASET_KIND, total_count=file.count))

    return ListPage(
        items=_Window(offset, file.read(offset, size), file.count),
        offset=offset,
        page_size=size,
        cursor_for=cursor_for,
        search_block={"dataset_id": dataset_id, "view": dataset_view(dataset_id), "mode": "dataset"},
    )


def register_dataset_page_tool(
    app: FastMCP, datasets: Datasets, codec: CursorCodec, layer: OutputLayer, *, max_output_tokens: int
) -> None:
    """`max_output_tokens` caps every page (at least MIN_OUTPUT_TOKENS, which the envelope needs)."""
    options = PageOptions(output_mode=OutputMode.INLINE, max_output_tokens=max(max_output_tokens, MIN_OUTPUT_TOKENS))

    @mcp_tool(app, "read-dataset-page", READ_PAGE_DESCRIPTION, annotations=READ_ONLY, output_schema=ROWS_OUTPUT)
    async def read_dataset_page(
        dataset_id: Annotated[PathText, Field(description="an id list-saved-datasets shows")],
        cursor: Annotated[str | None, Field(description="the last pagination.next_cursor")] = None,
        page_size: Annotated[
            int | None, Field(ge=1, le=MAX_PAGE_SIZE, description=f"default {DEFAULT_PAGE_SIZE}")
        ] = None,
    ) -> ToolResult:
        page = await anyio.to_thread.run_sync(lambda: dataset_page(datasets, codec, dataset_id, cursor, page_size))
        layout = Layout(tool="read-dataset-page", query=dataset_id, records_key="records")
        return tool_result(await anyio.to_thread.run_sync(lambda: layer.render(page, options, layout)))
