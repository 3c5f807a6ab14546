"""Pager: walking cursors returns every result exactly once, in order, through cuts, cache hits,
restores and concurrent use; each way a cursor can go stale is refused with its own error."""

from __future__ import annotations

import asyncio
import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from search_engine.engine import SearchEngine
from search_engine.models import Match, SearchRequest, SearchResult
from sessions import (
    CursorCodec,
    CursorGenerationError,
    CursorSignatureError,
    MemoryStore,
    Page,
    Pager,
)
from tests.session_fakes import SECRET, FakeClock, FakeEngine, next_page, request_for


def _cursor(page: Page) -> str:
    """The cursor of a page that has a next one."""
    assert page.next_cursor is not None, "the last page has no next cursor"
    return page.next_cursor


def contains_view(result: SearchResult, view: str) -> SearchResult:
    """A stand-in for the server's jq views: keep matches whose content contains `view`."""
    kept = [m for m in result.matches if view in m.content]
    return SearchResult(kept, len(kept), index_generation=result.index_generation)


def make_pager(engine: object, store: MemoryStore | None = None, **kw: object) -> Pager:
    store = store or MemoryStore(sweep_interval_s=None)
    return Pager(engine, store, CursorCodec(SECRET), view_fn=contains_view, **kw)  # type: ignore[arg-type]


def walk(pager: Pager, request: SearchRequest, page_size: int | None = None, view: str | None = None) -> list[Page]:
    pages = [pager.first_page(request, page_size, view=view)]
    while pages[-1].next_cursor is not None:
        pages.append(next_page(pager, _cursor(pages[-1])))
    return pages


def collected(pages: list[Page]) -> list[Match]:
    return [m for p in pages for m in p.matches]


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(0, 300), page_size=st.integers(1, 60), data=st.data())
def test_walking_with_random_cuts_and_restarts_yields_each_result_once(
    n: int, page_size: int, data: st.DataObject
) -> None:
    engine = FakeEngine(default_size=n)
    pager = make_pager(engine)
    page = pager.first_page(request_for(), page_size)
    seen: list[Match] = []
    zero_cuts = 0
    cut_yet = False
    last_page_number = 0
    previous: list[Match] = []
    while True:
        assert page.offset == len(seen)
        assert page.total_count == n
        if not cut_yet:  # no cut so far: plain positional numbering
            assert page.total_pages == max(1, math.ceil(n / page_size))
            assert page.current_page == page.offset // page_size + 1
        # Never decreasing (several cuts inside one page of page_size may share a number), and
        # strictly increasing after a full page.
        assert page.current_page >= last_page_number
        assert page.current_page > last_page_number or len(previous) < page_size
        last_page_number = page.current_page
        remaining = n - page.offset - len(page.matches)
        assert page.total_pages == page.current_page + math.ceil(remaining / page_size)
        k = data.draw(st.integers(0 if zero_cuts < 3 else min(1, len(page.matches)), len(page.matches)), label="cut")
        if k < len(page.matches):
            zero_cuts += k == 0
            cut_yet = True
            page = page.cut(k)
            assert page.total_pages > page.current_page  # a cut page is never the last
        assert page.has_more == (page.next_cursor is not None)
        previous = page.matches
        seen.extend(page.matches)
        if page.next_cursor is None:
            break
        if data.draw(st.booleans(), label="restart"):  # session gone: new process, same key
            pager = make_pager(engine)
        page = next_page(pager, _cursor(page))
    assert seen == engine.expected()


def test_first_page_shape() -> None:
    page = make_pager(FakeEngine(default_size=120)).first_page(request_for(), 50)
    assert (len(page.matches), page.offset, page.page_size, page.total_count) == (50, 0, 50, 120)
    assert (page.current_page, page.total_pages, page.has_more, page.cache) == (1, 3, True, "miss")
    assert (page.search_total_count, page.truncated, page.search_time_ms) == (120, False, 1.5)
    assert page.request == request_for() and page.view is None and page.page_time_ms > 0


def test_pages_follow_the_cursor_to_a_last_page_without_cursor() -> None:
    pages = walk(make_pager(FakeEngine(default_size=120)), request_for(), 50)
    assert [(p.offset, len(p.matches), p.current_page, p.cache) for p in pages] == [
        (0, 50, 1, "miss"),
        (50, 50, 2, "hit"),
        (100, 20, 3, "hit"),
    ]
    assert pages[-1].next_cursor is None and not pages[-1].has_more


def test_an_empty_result_is_one_empty_last_page() -> None:
    page = make_pager(FakeEngine(default_size=0)).first_page(request_for())
    assert (page.matches, page.has_more, page.next_cursor, page.total_pages) == ([], False, None, 1)


def test_identical_searches_reuse_the_session() -> None:
    engine = FakeEngine()
    pager = make_pager(engine)
    first = pager.first_page(request_for(), 50)
    again = pager.first_page(request_for(), 10)  # page size is presentation, not identity
    assert (again.cache, again.session_id, engine.calls) == ("hit", first.session_id, 1)
    assert pager.first_page(request_for("other")).cache == "miss"
    engine.gen = 1  # an index rebuild makes the cached list stale for *new* searches
    assert pager.first_page(request_for()).cache == "miss"
    assert engine.calls == 3


def test_a_restore_re_runs_the_search_once_and_continues_at_the_offset() -> None:
    engine = FakeEngine(default_size=120)
    page1 = make_pager(engine).first_page(request_for(), 50)
    fresh = make_pager(engine)  # e.g. the server restarted; same key from the key file
    page2 = next_page(fresh, _cursor(page1))
    assert (page2.cache, page2.offset, engine.calls) == ("restored", 50, 2)
    assert page2.session_id != page1.session_id
    page3 = next_page(fresh, _cursor(page2))
    assert (page3.cache, engine.calls) == ("hit", 2)
    assert collected([page1, page2, page3]) == engine.expected()


def test_a_restore_prefers_a_live_twin_session() -> None:
    engine, clock = FakeEngine(), FakeClock()
    store = MemoryStore(ttl_s=10, sweep_interval_s=None, clock=clock)
    page1 = make_pager(engine, store).first_page(request_for(), 50)
    clock.advance(11)  # page1's session expires
    twin = make_pager(engine, store).first_page(request_for(), 50)  # same search again
    page2 = next_page(make_pager(engine, store), _cursor(page1))
    assert (page2.cache, page2.session_id, engine.calls) == ("hit", twin.session_id, 2)


def test_a_cursor_from_another_key_is_refused() -> None:
    page = make_pager(FakeEngine()).first_page(request_for())
    other = Pager(FakeEngine(), MemoryStore(sweep_interval_s=None), CursorCodec("a-completely-different-key-42"))
    with pytest.raises(CursorSignatureError):
        next_page(other, _cursor(page))


def test_a_live_session_keeps_serving_its_snapshot_across_an_index_change() -> None:
    engine = FakeEngine()
    pager = make_pager(engine)
    page1 = pager.first_page(request_for(), 50)
    engine.gen, engine.edition = 1, 1
    page2 = next_page(pager, _cursor(page1))
    assert page2.cache == "hit" and page2.index_generation == 0
    assert page2.matches == FakeEngine().expected()[50:100]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda e: setattr(e, "gen", 7), "index generation 0 is now 7"),
        (lambda e: e.sizes.update(needle=119), "120 results then, 119 now"),
        (lambda e: setattr(e, "edition", 1), "files were edited"),
    ],
)
def test_a_restore_refuses_when_the_results_changed(change, message: str) -> None:
    engine = FakeEngine(default_size=120)
    page1 = make_pager(engine).first_page(request_for(), 50)
    change(engine)
    with pytest.raises(CursorGenerationError, match=f"{message}.*Restart the search without a cursor"):
        next_page(make_pager(engine), _cursor(page1))


def test_resume_hands_the_cursors_search_to_check_before_serving_it() -> None:
    """The server checks that search (its tool, roots, re-sent parameters) before a page: a
    refusal there serves nothing and searches nothing."""
    engine = FakeEngine()
    pager = make_pager(engine)
    request = request_for(ignore_case=True)
    page1 = pager.first_page(request, 50)
    seen: list[tuple[int, SearchRequest]] = []
    page2 = pager.resume(_cursor(page1), check=lambda state, search: seen.append((state.offset, search)))
    assert seen == [(50, request)] and page2.offset == 50

    def refuse(state: object, search: SearchRequest) -> None:
        raise ValueError("not this one")

    with pytest.raises(ValueError, match="not this one"):
        make_pager(engine).resume(_cursor(page1), check=refuse)  # its session gone: would search
    assert engine.calls == 1


def test_before_rerun_is_called_only_when_the_search_runs_again_and_before_it() -> None:
    """The server waits for the index there: never for a page a session (its own or a live twin)
    serves, always before the engine is asked anything when the search runs again."""
    engine, clock = FakeEngine(), FakeClock()
    store = MemoryStore(ttl_s=10, sweep_interval_s=None, clock=clock)
    page1 = make_pager(engine, store).first_page(request_for(), 40)
    reruns: list[tuple[SearchRequest, int]] = []

    def note(search: SearchRequest) -> None:
        reruns.append((search, engine.calls))

    assert make_pager(engine, store).resume(_cursor(page1), before_rerun=note).cache == "hit"  # its session
    clock.advance(11)  # page1's session expires
    twin = make_pager(engine, store).first_page(request_for(), 50)  # the same list, another session
    assert make_pager(engine, store).resume(_cursor(page1), before_rerun=note).session_id == twin.session_id
    assert reruns == []
    restored = make_pager(engine).resume(_cursor(page1), before_rerun=note)  # no session, no twin
    assert restored.cache == "restored" and reruns == [(request_for(), 2)] and engine.calls == 3


def test_page_size_limits_and_overrides() -> None:
    pager = make_pager(FakeEngine(default_size=500))
    assert len(pager.first_page(request_for()).matches) == 50
    with pytest.raises(ValueError, match="between 1 and 200, got 201"):
        pager.first_page(request_for(), 201)
    with pytest.raises(ValueError, match="got 0"):
        pager.first_page(request_for(), 0)
    page1 = pager.first_page(request_for(), 200)
    page2 = next_page(pager, _cursor(page1), page_size=30)
    assert (page2.offset, len(page2.matches), page2.page_size) == (200, 30, 30)
    assert next_page(pager, _cursor(page2)).page_size == 30  # the cursor remembers the new size
    with pytest.raises(ValueError, match="max_page_size"):
        make_pager(FakeEngine(), default_page_size=300, max_page_size=200)


def test_cut_bounds_and_cut_zero() -> None:
    pager = make_pager(FakeEngine())
    page = pager.first_page(request_for(), 50)
    assert page.cut(50) is page
    for bad in (-1, 51):
        with pytest.raises(ValueError, match=r"outside 0..50"):
            page.cut(bad)
    empty = page.cut(0)
    assert empty.matches == [] and empty.has_more
    assert next_page(pager, _cursor(empty)).matches == page.matches  # resumes at the same offset
    last = walk(pager, request_for(), 50)[-1]
    assert last.cut(5).next_cursor is not None  # a cut last page is no longer last


def test_a_view_is_its_own_session_and_survives_a_restore() -> None:
    engine = FakeEngine(default_size=300)
    pager = make_pager(engine)
    expected = [m for m in engine.expected() if "7" in m.content]
    pages = walk(pager, request_for(), 10, view="7")
    assert collected(pages) == expected
    assert pages[0].cache == "miss" and pages[0].view == "7"
    assert (pages[0].total_count, pages[0].search_total_count) == (len(expected), 300)
    plain = pager.first_page(request_for(), 10)
    assert plain.cache == "miss" and plain.total_count == 300  # the unviewed list is another session

    restored = next_page(make_pager(engine), _cursor(pages[0]))
    assert restored.cache == "restored" and restored.view == "7"
    assert restored.matches == expected[10:20]


def test_a_view_of_a_cached_search_does_not_search_again() -> None:
    engine = FakeEngine()
    pager = make_pager(engine)
    pager.first_page(request_for())
    viewed = pager.first_page(request_for(), view="needle-e0-1")
    assert (viewed.cache, engine.calls) == ("hit", 1)
    assert all("needle-e0-1" in m.content for m in viewed.matches)


def test_a_view_needs_a_view_function() -> None:
    pager = Pager(FakeEngine(), MemoryStore(sweep_interval_s=None), CursorCodec(SECRET))
    with pytest.raises(ValueError, match="no view function"):
        pager.first_page(request_for(), view=".matches")


def test_a_result_larger_than_the_budget_still_pages_by_re_running() -> None:
    engine = FakeEngine(default_size=100)
    pager = make_pager(engine, MemoryStore(max_bytes=2000, sweep_interval_s=None))
    pages = walk(pager, request_for(), 40)
    assert collected(pages) == engine.expected()
    assert [p.cache for p in pages] == ["miss", "restored", "restored"]
    assert "not cached" in pages[0].warnings[0]


def _walk_many(pager: Pager, queries: list[str]) -> dict[str, list[Match]]:
    return {q: collected(walk(pager, request_for(q), 7)) for q in queries}


async def test_concurrent_tasks_and_threads_lose_and_repeat_nothing() -> None:
    """A tiny store (3 sessions) under 16 distinct searches forces evictions and restores mid-walk."""
    queries = [f"q{i}" for i in range(16)]
    engine = FakeEngine(sizes={q: 40 + 9 * i for i, q in enumerate(queries)})
    store = MemoryStore(max_sessions=3, sweep_interval_s=0.001)
    pager = make_pager(engine, store)
    try:
        async_walks = [asyncio.to_thread(_walk_many, pager, queries[i:] + queries[:i]) for i in range(12)]
        with ThreadPoolExecutor(4) as pool:
            thread_walks = [pool.submit(_walk_many, pager, list(reversed(queries))) for _ in range(4)]
            results = await asyncio.gather(*async_walks) + [f.result() for f in thread_walks]
    finally:
        store.close()
    for walked in results:
        assert walked == {q: engine.expected(q) for q in queries}
    assert store.stats().evictions > 0 and engine.calls > len(queries)  # restores really happened


def test_real_regex_search_pages_and_restores(code_tree: Path) -> None:
    engine = SearchEngine()
    request = SearchRequest(query=r"needle_\d+_1\d", root=str(code_tree.resolve()))
    full = engine.search(request).matches
    assert len(full) == 120  # 12 files x needle_i_10..19
    pages = [make_pager(engine).first_page(request, 25)]
    pages.append(pages[0].cut(9))
    pages[0] = pages.pop()
    while pages[-1].next_cursor is not None:
        pages.append(next_page(make_pager(engine), _cursor(pages[-1])))  # a new process every page
    assert collected(pages) == full
    assert {p.cache for p in pages[1:]} == {"restored"}
    (code_tree / "lib" / "mod00.py").write_text("def needle_0_10(x): pass\n")
    with pytest.raises(CursorGenerationError):
        next_page(make_pager(engine), _cursor(pages[1]))


def test_reuse_false_searches_afresh_but_cursors_keep_their_snapshot() -> None:
    """Regex results have no index generation: a repeated first page must see edited files."""
    engine = FakeEngine()
    pager = make_pager(engine)
    first = pager.first_page(request_for(), 50, reuse=False)
    engine.edition = 1  # the files were edited
    again = pager.first_page(request_for(), 50, reuse=False)
    assert (again.cache, engine.calls) == ("miss", 2)
    assert again.matches == engine.expected()[:50]
    assert next_page(pager, _cursor(first)).matches == FakeEngine().expected()[50:100]
    viewed = pager.first_page(request_for(), view="needle-e1-1", reuse=False)
    assert (viewed.cache, engine.calls) == ("miss", 3)
