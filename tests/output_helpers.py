"""Builders for the output-layer tests: real match records (made by the server's own
`match_record`), pages over them, a layer on a temporary directory, a page walker, and SQL run
the way analyze-with-duckdb runs it."""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path
from typing import Any

from search_engine.models import Match, MatchType
from server.output import Layout, ListPage, OffloadStore, OutputLayer, OutputMode, PageOptions, Rendered
from server.records import match_record
from server.settings import OffloadSettings, SqlSettings
from server.sql import Datasets, QueryResult, answer_query

LANGUAGES = {".py": "python", ".go": "go", ".rs": "rust"}


def make_records(
    n: int,
    *,
    scored: bool = False,
    content_chars: int = 60,
    files: int = 7,
    context: bool = False,
    text: str = "needle",
) -> list[dict[str, Any]]:
    """`n` match records in the inline shape, spread over `files` files of three languages."""
    out = []
    for i in range(n):
        suffix = list(LANGUAGES)[i % files % 3]
        body = f"{text} {i} " + "x" * content_chars
        m = Match(
            path=f"src/pkg{i % files}/mod{i % files}{suffix}",
            line_start=i + 1,
            line_end=i + 1,
            byte_start=i * 100,
            byte_end=i * 100 + len(body),
            content=body,
            type=MatchType.SEMANTIC if scored else MatchType.REGEX,
            language=LANGUAGES[suffix],
            score=round(1 - i / (n + 1), 6) if scored else None,
            context_before=("before",) if context else (),
            context_after=("after",) if context else (),
        )
        out.append(match_record(m))
    return out


def cursor_for(offset: int) -> str:
    return f"offset:{offset}"


def offset_of(cursor: str) -> int:
    return int(cursor.split(":", 1)[1])


def make_page(records: list[Any], page_size: int | None = None, offset: int = 0) -> ListPage:
    return ListPage(
        items=records,
        offset=offset,
        page_size=page_size,
        search_block={"query": "needle", "mode": "regex", "parameters": {}},
        metadata_block={"search_time_ms": 1.0, "cache": "miss"},
        cursor_for=cursor_for,
    )


def make_layer(output_dir: Path, max_bytes: int | None = None, **settings: Any) -> OutputLayer:
    """A layer of the `[offload]` `settings`; `max_bytes` lowers its byte ceiling, which is no
    setting (`MAX_ANSWER_BYTES`), on the layer made."""
    offload = OffloadSettings(output_dir=output_dir, **settings)
    layer = OutputLayer(
        offload, SqlSettings(), OffloadStore(offload.output_dir, retention_hours=offload.retention_hours)
    )
    if max_bytes is not None:
        layer.ceiling = dataclasses.replace(layer.ceiling, bytes=max_bytes)
    return layer


def query(datasets: Datasets, sql: str, dataset_id: str | None = None) -> QueryResult:
    """`sql` answered by the server's path (`answer_query`, as analyze-with-duckdb answers it)
    into a file, read back as a QueryResult: the rows from the file, the rest from the answer.
    The answer ceiling is the least there is, so any result over 1 KB is streamed to the file
    under `MAX_RESULT_BYTES`, as a large one is."""
    with tempfile.TemporaryDirectory() as out:
        layer = make_layer(Path(out), max_bytes=1024)
        layout = Layout(tool="analyze-with-duckdb", query=sql, records_key="rows")
        r = answer_query(datasets, layer, sql, dataset_id, PageOptions(output_mode=OutputMode.FILE_REF), layout)
        assert r.file_ref is not None
        rows = [json.loads(line) for line in Path(r.file_ref.path).read_text().splitlines()[1:]]
    search, metadata = r.structured["search"], r.structured["metadata"]
    truncated, elapsed = r.structured["results"]["truncated"], metadata["query_time_ms"]
    return QueryResult(
        search["query"],
        metadata["columns"],
        rows,
        truncated,
        elapsed,
        search["parameters"]["datasets"],
        metadata["warnings"],
    )


def options(**kw: Any) -> tuple[PageOptions, Layout]:
    """The page options (`output_mode` by name, as an agent sends it) and the layout named in
    `kw`, for `layer.render(page, *options(...))`; the layout of a regex search by default."""
    chosen = {name: kw.pop(name) for name in [f.name for f in dataclasses.fields(PageOptions)] if name in kw}
    if "output_mode" in chosen:
        chosen["output_mode"] = OutputMode(chosen["output_mode"])
    kw.setdefault("tool", "regex_search")
    kw.setdefault("query", "needle")
    return PageOptions(**chosen), Layout(**kw)


def walk(layer: OutputLayer, records: list[Any], page_size: int, opts: tuple[PageOptions, Layout]) -> list[Rendered]:
    """Render page after page, following each response's next_cursor to the end."""
    rendered = [layer.render(make_page(records, page_size), *opts)]
    while (cursor := rendered[-1].structured["pagination"]["next_cursor"]) is not None:
        rendered.append(layer.render(make_page(records, page_size, offset_of(cursor)), *opts))
        assert len(rendered) <= len(records) + 1, "walk does not advance"
    return rendered
