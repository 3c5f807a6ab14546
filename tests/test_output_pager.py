"""The output layer over the real paging stack: ripgrep results kept by the session Pager, wrapped
by the server's SearchResponse, cut by the layer to a small budget and walked by cursor to the
end: every match exactly once, in the engine's order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from search_engine.engine import SearchEngine
from search_engine.models import SearchRequest
from server.output import estimate_tokens
from server.records import Detail, match_record
from server.response import SearchResponse
from sessions import CursorCodec, MemoryStore, Pager
from tests.output_helpers import make_layer, options
from tests.session_fakes import next_page


def test_cut_pages_of_a_real_search_walk_losslessly(code_tree: Path, tmp_path: Path) -> None:
    engine = SearchEngine()
    request = SearchRequest(query="needle", root=str(code_tree))
    expected = [match_record(m, detail=Detail.COMPACT, snippet_length=500) for m in engine.search(request).matches]
    assert len(expected) == 240

    pager = Pager(engine, MemoryStore(sweep_interval_s=None), CursorCodec("output-layer-test-secret-0123456789"))
    layer = make_layer(tmp_path / "out")
    chosen, layout = options(max_output_tokens=1500, snippet_length=500)
    seen: list[dict[str, Any]] = []
    rendered = layer.render(SearchResponse(pager.first_page(request, 100), chosen), chosen, layout)
    while True:
        assert rendered.mode == "inline" and estimate_tokens(rendered.text) <= 1500
        seen += rendered.structured["results"]["matches"]
        cursor = rendered.structured["pagination"]["next_cursor"]
        if cursor is None:
            break
        rendered = layer.render(SearchResponse(next_page(pager, cursor), chosen), chosen, layout)
    assert seen == expected
