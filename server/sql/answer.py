"""Answering one SQL query (`analyze-with-duckdb`) without ever holding its whole result.

One SELECT can produce gigabytes (`SELECT repeat('x', 100000) FROM range(100000)`), so rows
are fetched in small batches (`QueryStream`), each turned into a JSON-ready record and its
JSON line as it arrives:
- the rows that fit one answer (the layer's byte ceiling) are kept; when the result ends
  there, it is answered like any page (inline, or a file when over the token ceiling);
- otherwise, in `auto` and `file_ref` mode, they and the rest are streamed to an offload file,
  up to `MAX_RESULT_BYTES` of JSON, and the answer is that file's descriptor, saying where and
  why the result was cut. The file is a dataset like any other: SQL, read-dataset-page and jq
  read it;
- in `inline` mode (or with max_output_tokens) the rows read so far are answered, cut to fit,
  and the answer says the result goes on and how to get the rest;
- `legacy` (a bare array) has no room to say it was cut, so a result over the ceiling is
  refused with what to do instead.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from server.errors import SqlResultTooLargeError, StoreWriteError
from server.output import (
    CHARS_PER_TOKEN,
    MAX_RESULT_BYTES,
    BoundedRows,
    Layout,
    OutputLayer,
    OutputMode,
    PageOptions,
    Rendered,
    Row,
    select_mode,
)
from server.sql.datasets import Datasets, QueryStream


def _cuts(kept: BoundedRows) -> list[str]:
    """The warning saying where the rows were cut, if they were."""
    fix = "add LIMIT/OFFSET, select fewer or shorter columns (e.g. left(col, 200)), or aggregate"
    return [f"the result was cut after {kept.count} rows: {kept.reached()}; {fix}"] if kept.cut else []


def answer_query(
    datasets: Datasets,
    layer: OutputLayer,
    sql: str,
    dataset_id: str | None,
    options: PageOptions,
    layout: Layout,
) -> Rendered:
    """Run `sql` and answer it (see the module doc); raises the Sql*Error of a bad query."""
    budget, most = answer_bytes(layer), MAX_RESULT_BYTES
    with datasets.stream(sql, dataset_id) as stream:
        rows = stream.rows()
        head, size = [], 0
        for row in rows:
            head.append(row)
            size += row.size
            if size > budget:
                break
        else:  # the whole result is at most one answer's size
            return layer.render(stream.result([r.record for r in head], []).to_page(), options, layout)
        mode = select_mode(options.output_mode, fits=False, wants_small=options.max_output_tokens is not None)
        if mode is OutputMode.LEGACY:
            raise SqlResultTooLargeError(
                f"the result is over {budget} bytes of JSON, more than output_mode=legacy can return "
                "(a bare array has no room to say what was cut); add LIMIT/OFFSET or select fewer columns, or call "
                "with output_mode=auto to have the whole result written to a file"
            )
        if mode is OutputMode.INLINE:
            more = (
                f"only the first {len(head)} rows were read: the result is larger than one answer ({budget} "
                f"bytes); call with output_mode=auto to have it written to a file (up to {most} "
                "bytes), or narrow it with LIMIT/OFFSET or fewer columns"
            )
            return layer.render(stream.result([r.record for r in head], [more]).to_page(), options, layout)
        return _written(stream, head, rows, most, layer, options, layout)


def answer_bytes(layer: OutputLayer) -> int:
    """Bytes of rows past which a result cannot fit one answer: the byte ceiling, or the token
    ceiling at its most generous (an ASCII character is a quarter token, any other at most 4
    bytes a token)."""
    return min(layer.ceiling.bytes, CHARS_PER_TOKEN * layer.ceiling.tokens)


def _written(
    stream: QueryStream,
    head: list[Row],
    rest: Iterator[Row],
    max_bytes: int,
    layer: OutputLayer,
    options: PageOptions,
    layout: Layout,
) -> Rendered:
    """Stream the result to an offload file and answer with its descriptor; `head` (already
    read) is also the sample the descriptor shows."""
    kept = BoundedRows(itertools.chain(head, rest), max_bytes)
    lines = (row.line for row in kept)
    try:
        offloaded = layer.store.write_lines(
            tool=layout.tool, query=layout.query, lines=lines, record_keys=stream.columns
        )
    except StoreWriteError as exc:  # answered inline instead, cut to fit, by the layer
        why = f"only the first {len(head)} rows were read: the result could not be written to a file ({exc})"
        return layer.render(stream.result([r.record for r in head], [why]).to_page(), options, layout)
    sample = [r.record for r in head[: kept.count]]
    page = stream.result(sample, _cuts(kept)).to_page(written=kept.count)
    return layer.render_written(page, offloaded, options, layout)
