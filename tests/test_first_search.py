"""The first semantic search on a fresh install, through a real `codepager serve` subprocess:
it waits for the index while sending progress that names each phase, answers within
`index.ready_wait_s` for a small root, answers `index_not_ready` with an estimate for a long
build, and `index_status` shows the phases. With `index.index_on_start` off, asking for the
status first no longer strands the root unbuilt."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from server.background_indexer import PHASES, RootState
from tests.code_tree import write_code_tree
from tests.server_helpers import page_matches, serve_env, stdio_client, structured

Note = tuple[float, float | None, str | None]


def phase_of(message: str | None) -> str:
    """`indexing: embed 1200/3400` -> `embed`."""
    assert message is not None and message.startswith("indexing: ")
    return message.removeprefix("indexing: ").split()[0]


@pytest.mark.slow
async def test_first_hybrid_call_waits_with_phased_progress_and_answers(tmp_path: Path) -> None:
    """The product's defaults (index on start, 30 s wait), a fresh cache dir: the first
    hybrid call answers with results, after progress notifications whose value only grows
    (as MCP requires) and whose messages name the phases. The server writes no progress bar
    to its stderr (not a terminal)."""
    root = write_code_tree(tmp_path / "repo", files=300)
    env = serve_env(tmp_path, index__index_on_start="true")
    notes: list[Note] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append((progress, total, message))

    stderr = tmp_path / "serve.stderr"
    async with stdio_client(root, tmp_path, env, log_file=stderr) as client:
        result = await client.call_tool(
            "hybrid_search", {"query": "needle 7", "top_k": 5}, progress_handler=on_progress
        )
    body = structured(result)
    assert body["results"]["count"] == 5
    assert notes, "the first call waited for the index without a single progress notification"
    values = [p for p, _, _ in notes]
    assert values == sorted(values) and len(set(values)) == len(values) and all(t == 100 for _, t, _ in notes)
    # How many phases a notification lands in depends on the machine's speed (they are sent
    # while the call polls); that the build passes through every phase is asserted below.
    phases = [phase_of(m) for _, _, m in notes]
    assert set(phases) <= set(PHASES)
    assert phases == sorted(phases, key=list(PHASES).index)  # in build order
    log = stderr.read_text(errors="replace")
    assert "\r" not in log and "it/s" not in log and "%|" not in log, log[-2000:]


@pytest.mark.slow
async def test_a_long_build_answers_not_ready_with_an_estimate_and_status_shows_each_phase(tmp_path: Path) -> None:
    # No wait at all: the build starts with this first call (serve_env turns indexing on start
    # off), so it cannot be ready when the call checks, however fast the machine.
    root = write_code_tree(tmp_path / "repo", files=300)
    env = serve_env(tmp_path, index__ready_wait_s="0")
    async with stdio_client(root, tmp_path, env) as client:
        early = await client.call_tool("hybrid_search", {"query": "needle"}, raise_on_error=False)
        assert early.is_error
        error = early.structured_content["error"]
        assert error["code"] == "index_not_ready"
        progress = error["progress"]
        assert progress["phase"] in PHASES
        if progress["eta_s"] is not None:
            assert progress["eta_s"] > 0 and f"retry in about {progress['eta_s']:.0f} s" in error["message"]
        seen: list[str] = []
        status: dict[str, Any] = {}
        with anyio.fail_after(600):
            while True:
                status = structured(await client.call_tool("index_status", {}))
                phase = status["progress"]["phase"]
                if not seen or seen[-1] != phase:
                    seen.append(phase)
                if not status["building"]:
                    break
                await anyio.sleep(0.05)
        assert seen[-1] == "ready" and status["exists"] and status["files"] == 301  # and the README
        # Which phases a poll lands in depends on the machine (the build thread can keep the
        # event loop waiting through a whole phase), so this asserts what always holds: only
        # build phases, only forward, ending ready. Each phase's own reading is unit-tested below.
        observed = [progress["phase"], *seen]
        assert set(observed) <= {*PHASES, "ready"}
        assert observed == sorted(observed, key=[*PHASES, "ready"].index)
        found = structured(await client.call_tool("hybrid_search", {"query": "needle_7_3", "top_k": 1}))
        assert page_matches(found)[0]["path"] == "pkg/mod07.py"


@pytest.mark.slow
@pytest.mark.parametrize("then", ["reindex", "hybrid_search"])
async def test_index_status_first_does_not_strand_the_root_when_indexing_on_start_is_off(
    tmp_path: Path, then: str
) -> None:
    """Security (availability): with `index_on_start=false`, calling `index_status` first used
    to record the root as "queued" without queueing it; `reindex` then did nothing and semantic
    and hybrid search answered `index_not_ready` for the server's whole life."""
    root = write_code_tree(tmp_path / "repo")
    env = serve_env(tmp_path, index__ready_wait_s="20")  # serve_env turns index_on_start off
    async with stdio_client(root, tmp_path, env) as client:
        before = structured(await client.call_tool("index_status", {}))
        if then == "reindex":
            after = structured(await client.call_tool("reindex", {}))
            assert after["exists"] and after["generation"] == 1 and not after["building"]
        else:
            found = structured(await client.call_tool("hybrid_search", {"query": "needle_3_4", "top_k": 1}))
            assert page_matches(found)[0]["path"] == "pkg/mod03.py"
        status = structured(await client.call_tool("index_status", {}))
        assert status["progress"]["phase"] == "ready" and status["files"] == 13
    # and the first status said plainly that nothing had been asked for yet
    assert before["progress"]["phase"] == "idle" and not before["building"] and not before["exists"]


def test_a_build_reports_every_phase_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What `index_status` and the progress notifications read: the worker passes through the
    model, scan, chunk, embed and write phases, in that order, then ready (a real engine and
    model on a small tree; every phase reported, however fast the machine)."""
    from search_engine.config import EngineConfig
    from search_engine.engine import SearchEngine
    from server.background_indexer import BackgroundIndexer

    reported: list[str] = []
    advance = RootState.advance

    def recording(self: RootState, phase: str, done: int, total: int) -> None:
        if not reported or reported[-1] != phase:
            reported.append(phase)
        advance(self, phase, done, total)

    monkeypatch.setattr(RootState, "advance", recording)
    root = write_code_tree(tmp_path / "repo", files=20)
    indexer = BackgroundIndexer(SearchEngine(EngineConfig(cache_dir=tmp_path / "cache")), ready_wait_s=30)
    state = indexer.request(root)
    with anyio.from_thread.start_blocking_portal() as portal:
        portal.call(indexer.wait, {root: state}, None)
    indexer.close()
    assert reported == ["model", "scan", "chunk", "embed", "write"]
    assert indexer.state(root).phase == "ready"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_only_grows_through_the_phases() -> None:
    clock = Clock()
    state = RootState(clock=clock)
    state.started_at = clock.now
    percents = [state.percent()]
    for phase, done, total in [
        ("model", 0, 1),
        ("scan", 0, 0),
        ("scan", 40, 40),
        ("chunk", 10, 40),
        ("chunk", 40, 40),
        ("embed", 0, 1000),
        ("embed", 250, 1000),
        ("write", 0, 1),
        ("write", 1, 1),
    ]:
        state.advance(phase, done, total)
        percents.append(state.percent())
    assert percents == sorted(percents) and percents[-1] == 100.0


def test_the_estimate_follows_the_rate_files_are_read_at_in_this_build() -> None:
    """Issue 37.8: `index_not_ready` said 3.3 s when about 70 s remained. A build reports
    "chunk" while its first batch fills, then "embed" for the same files (`_Stream.flush`
    reports the files written before the batch, then after it): the estimate was measured
    from the start of "embed", so the first batch's chunking did not count. Here 250 files
    took 20 s to chunk and 1 s to embed: 750 left take about 60 s, not 3. The rate is measured
    from the first file done: the 4 s the chunking workers took to start did not read one."""
    clock = Clock()
    state = RootState(clock=clock)
    state.started_at = clock.now
    state.advance("model", 0, 1)
    clock.now += 2.0
    state.advance("scan", 1000, 1000)
    assert state.eta_s() is None  # nothing read yet: nothing to go on
    state.advance("chunk", 0, 1000)
    clock.now += 4.0
    assert state.eta_s() is None  # the workers are starting
    state.advance("chunk", 1, 1000)
    assert state.eta_s() is None  # one report of a file done tells no rate yet
    for done in (64, 128, 192):
        clock.now += 5.0
        state.advance("chunk", done, 1000)
    assert state.eta_s() == pytest.approx(808 * 15.0 / 191)
    clock.now += 4.0
    state.advance("embed", 0, 1000)  # the first batch (250 files) is embedded now
    clock.now += 1.0
    state.advance("embed", 250, 1000)
    assert state.eta_s() == pytest.approx(750 * 20.0 / 249)  # 60 s
    assert state.describe() == "embed 250/1000" and state.building
    state.advance("write", 0, 1)
    assert state.eta_s() is None  # the files are read: writing is short, and has no rate to go by


def test_a_new_count_of_files_starts_a_new_rate() -> None:
    """An update first re-reads its edited files (chunk d/len(edited)), then reads the added
    ones (chunk d/to_read): the rate of the second count starts when it does."""
    clock = Clock()
    state = RootState(clock=clock)
    state.advance("chunk", 0, 10)
    clock.now += 10.0
    state.advance("chunk", 10, 10)
    state.advance("chunk", 0, 400)
    clock.now += 1.0
    state.advance("chunk", 10, 400)
    clock.now += 2.0
    state.advance("chunk", 110, 400)
    assert state.eta_s() == pytest.approx(290 * 2.0 / 100)


def test_a_full_reindex_keeps_the_index_it_replaces_serving(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by an audit: `reindex full=true` from one client made every client's semantic and
    hybrid calls answer index_not_ready for the length of the rebuild, though the previous
    generation was on disk and loaded (an agent looping the call kept semantic search down).
    Here the rebuild is held at the writers' lock, as another process writing would hold it:
    the root stays ready meanwhile, and the rebuild completes once the lock is free."""
    from search_engine.config import EngineConfig
    from search_engine.engine import SearchEngine
    from server.background_indexer import BackgroundIndexer

    root = write_code_tree(tmp_path / "repo", files=20)
    engine = SearchEngine(EngineConfig(cache_dir=tmp_path / "cache"))
    indexer = BackgroundIndexer(engine, ready_wait_s=30)
    with anyio.from_thread.start_blocking_portal() as portal:
        portal.call(indexer.wait, {root: indexer.request(root)}, None)
        first = engine.indexes.store(root).current_name()
        model_loading = threading.Event()
        advance = RootState.advance

        def noting(self: RootState, phase: str, done: int, total: int) -> None:
            if phase == "model":
                model_loading.set()
            advance(self, phase, done, total)

        monkeypatch.setattr(RootState, "advance", noting)
        with engine.indexes.store(root).lock(timeout_s=5):
            state = indexer.request(root, refresh=True, full=True)
            assert model_loading.wait(30), "the rebuild never started"
            assert state.ready and state.phase != "ready", (state.ready, state.phase)
            portal.call(indexer.wait, {root: state}, None)  # answers at once: no index_not_ready
        assert indexer.request(root) is state  # ready: nothing more is queued
        indexer.close()
        assert indexer._worker is not None
        indexer._worker.join(60)  # the rebuild, then the close
    assert state.phase == "ready" and state.error is None
    assert engine.indexes.store(root).current_name() != first  # rebuilt, as asked
