"""OutputLayer: mode selection at the ceiling's edges, every output mode, lossless cuts across
pages, stats, the single-oversized-record case, and offload failures that must never fail a call."""

from __future__ import annotations

import json
import os
import resource
import signal
import stat
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from server.output import MAX_ANSWER_BYTES, MIN_OUTPUT_TOKENS, OffloadStore, OutputLayer, OutputMode, estimate_tokens
from server.output.jsontext import byte_size
from server.output.layer import Ceiling, select_mode
from server.settings import OffloadSettings, SqlSettings
from server.sql import Datasets
from tests.output_helpers import make_layer, make_page, make_records, options, walk


def _jsonl(path: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def _inline_size(records: list[Any], tmp_path: Path) -> tuple[int, int]:
    """Tokens and bytes of the full inline response of one page of `records`."""
    r = make_layer(tmp_path / "probe", max_tokens=10**9, max_bytes=10**9).render(
        make_page(records), *options(output_mode="inline")
    )
    assert r.mode == "inline" and not r.warnings
    return estimate_tokens(r.text), byte_size(r.text)


# -- selection -------------------------------------------------------------------------------


def test_select_mode_matrix() -> None:
    for mode in (OutputMode.INLINE, OutputMode.FILE_REF, OutputMode.LEGACY):
        for fits in (True, False):
            for small in (True, False):
                assert select_mode(mode, fits=fits, wants_small=small) is mode
    assert select_mode(OutputMode.AUTO, fits=True, wants_small=False) is OutputMode.INLINE
    assert select_mode(OutputMode.AUTO, fits=False, wants_small=False) is OutputMode.FILE_REF
    assert select_mode(OutputMode.AUTO, fits=False, wants_small=True) is OutputMode.INLINE


def test_ceiling_checks_tokens_and_bytes() -> None:
    c = Ceiling(tokens=10, bytes=30)
    assert c.fits("a" * 30) and not c.fits("a" * 41)
    assert c.fits("é" * 10) and not c.fits("é" * 11)  # 1 token per non-ASCII char
    assert not Ceiling(tokens=100, bytes=30).fits("é" * 16)  # 32 bytes
    assert c.lowered_to(5) == Ceiling(5, 30) and c.lowered_to(50) is c and c.lowered_to(None) is c


@pytest.mark.parametrize("just", ["under", "at", "over"])
def test_auto_switches_to_file_ref_exactly_above_the_token_ceiling(tmp_path: Path, just: str) -> None:
    records = make_records(40)
    tokens, _ = _inline_size(records, tmp_path)
    ceiling = {"under": tokens + 1, "at": tokens, "over": tokens - 1}[just]
    r = make_layer(tmp_path / "out", max_tokens=ceiling).render(make_page(records), *options())
    assert r.mode == ("file_ref" if just == "over" else "inline")
    if r.mode == "inline":
        assert r.structured["results"]["matches"] == records and estimate_tokens(r.text) <= ceiling
    else:
        assert r.structured["results"]["file_ref"]["line_count"] == 41


@pytest.mark.parametrize("just", ["at", "over"])
def test_auto_switches_to_file_ref_exactly_above_the_byte_ceiling(tmp_path: Path, just: str) -> None:
    records = make_records(40, text="ünïcödé")
    tokens, nbytes = _inline_size(records, tmp_path)
    layer = make_layer(tmp_path / "out", max_tokens=tokens * 2, max_bytes=nbytes - (just == "over"))
    assert layer.render(make_page(records), *options()).mode == ("file_ref" if just == "over" else "inline")


# -- modes -----------------------------------------------------------------------------------


def test_inline_response_shape_and_text_equals_structured(tmp_path: Path) -> None:
    records = make_records(30, scored=True)
    r = make_layer(tmp_path / "out").render(make_page(records, page_size=10), *options())
    assert r.mode == "inline" and r.file_ref is None
    assert json.loads(r.text) == r.structured
    assert list(r.structured) == ["search", "results", "pagination", "metadata"]
    results = r.structured["results"]
    assert results == {
        "mode": "inline",
        "matches": records[:10],
        "count": 10,
        "total_count": 30,
        "has_more": True,
        "truncated": False,
    }
    assert r.structured["pagination"]["next_cursor"] == "offset:10"
    assert r.structured["metadata"]["warnings"] == []


def test_file_ref_mode_always_offloads_and_keeps_the_envelope(tmp_path: Path) -> None:
    records = make_records(12, scored=True)
    r = make_layer(tmp_path / "out").render(make_page(records, page_size=5), *options(output_mode="file_ref"))
    assert r.mode == "file_ref" and json.loads(r.text) == r.structured
    results = r.structured["results"]
    assert set(results) == {"mode", "file_ref", "count", "total_count", "has_more", "truncated"}
    assert (results["mode"], results["count"], results["total_count"], results["has_more"]) == ("file_ref", 5, 12, True)
    assert r.structured["pagination"]["next_cursor"] == "offset:5"
    lines = _jsonl(results["file_ref"]["path"])
    assert lines[0]["type"] == "codepager_header" and lines[0]["next_cursor"] == "offset:5"
    assert lines[1:] == records[:5]
    assert r.file_ref is not None and r.file_ref.uri == f"codepager://results/{r.file_ref.id}"
    assert r.file_ref.name == Path(results["file_ref"]["path"]).name


def test_auto_offloads_a_big_page_and_the_file_holds_exactly_the_inline_records(tmp_path: Path) -> None:
    records = make_records(300, content_chars=400)
    r = make_layer(tmp_path / "out").render(make_page(records, page_size=200), *options())
    assert r.mode == "file_ref"
    assert estimate_tokens(r.text) < 4000  # the descriptor is small whatever the page
    assert _jsonl(r.structured["results"]["file_ref"]["path"])[1:] == records[:200]


def test_legacy_is_the_bare_array(tmp_path: Path) -> None:
    records = make_records(8)
    r = make_layer(tmp_path / "out").render(make_page(records, page_size=5), *options(output_mode="legacy"))
    assert r.mode == "legacy" and json.loads(r.text) == records[:5]
    assert r.structured["results"]["matches"] == records[:5]  # structuredContent: the inline page


# -- cutting ---------------------------------------------------------------------------------


def test_inline_over_the_ceiling_is_cut_to_fit_with_a_warning(tmp_path: Path) -> None:
    records = make_records(200, content_chars=300)
    layer = make_layer(tmp_path / "out", max_tokens=5000)
    r = layer.render(make_page(records, page_size=200), *options(output_mode="inline"))
    res = r.structured["results"]
    assert r.mode == "inline" and 0 < res["count"] < 200
    assert res["truncated"] is True and res["has_more"] is True
    assert res["matches"] == records[: res["count"]]
    assert r.structured["pagination"]["next_cursor"] == f"offset:{res['count']}"
    assert estimate_tokens(r.text) <= 5000
    # The cut is the largest that fits: one more record would not.
    assert estimate_tokens(r.text) + estimate_tokens(json.dumps(records[res["count"]])) > 5000
    assert r.warnings and r.structured["metadata"]["warnings"] == list(r.warnings)
    assert "next_cursor continues" in r.warnings[0]
    assert not list((tmp_path / "out").glob("*.jsonl"))


@pytest.mark.parametrize("mode", ["inline", "auto"])
def test_cut_pages_walk_losslessly_to_the_end(tmp_path: Path, mode: str) -> None:
    records = make_records(157, content_chars=250, scored=True)
    layer = make_layer(tmp_path / "out", max_tokens=3000)
    opts = options(output_mode=mode, max_output_tokens=2000 if mode == "auto" else None)
    pages = walk(layer, records, 50, opts)
    seen = [rec for p in pages for rec in p.structured["results"]["matches"]]
    assert seen == records
    assert all(estimate_tokens(p.text) <= (3000 if mode == "inline" else 2000) for p in pages)
    assert len(pages) > 4 and all(p.structured["results"]["truncated"] for p in pages[:-1])  # really cut
    assert pages[-1].structured["results"]["has_more"] is False


def test_max_output_tokens_cuts_instead_of_offloading(tmp_path: Path) -> None:
    records = make_records(60, content_chars=200)
    r = make_layer(tmp_path / "out").render(make_page(records), *options(max_output_tokens=MIN_OUTPUT_TOKENS * 4))
    assert r.mode == "inline" and estimate_tokens(r.text) <= MIN_OUTPUT_TOKENS * 4
    assert r.structured["results"]["truncated"] is True
    assert "max_output_tokens=1024" in r.warnings[0]


def test_a_single_record_too_big_is_shrunk_with_a_marker_and_the_walk_moves_on(tmp_path: Path) -> None:
    records = make_records(3)
    records[0]["match"]["content"] = "needle " + "y" * 100_000
    layer = make_layer(tmp_path / "out", max_tokens=2000)
    r = layer.render(make_page(records), *options(output_mode="inline"))
    res = r.structured["results"]
    assert res["count"] == 1 and res["truncated"] is True
    content = res["matches"][0]["match"]["content"]
    assert content.startswith("needle yyy") and "…[cut " in content and len(content) < 10_000
    assert res["matches"][0]["file"] == records[0]["file"]
    assert estimate_tokens(r.text) <= 2000
    assert r.structured["pagination"]["next_cursor"] == "offset:1"
    assert any("output_mode=file_ref" in w for w in r.warnings)


# -- stats -----------------------------------------------------------------------------------


def test_stats_only_has_no_matches_covers_the_whole_list_and_never_offloads(tmp_path: Path) -> None:
    records = make_records(90, scored=True)
    layer = make_layer(tmp_path / "out")
    r = layer.render(make_page(records, page_size=20, offset=40), *options(stats_only=True, output_mode="file_ref"))
    assert r.mode == "stats_only" and json.loads(r.text) == r.structured
    res = r.structured["results"]
    assert "matches" not in res and res["count"] == 0 and res["total_count"] == 90
    stats = res["stats"]
    per_file = Counter(rec["file"]["path"] for rec in records)
    assert stats["total_count"] == 90 and stats["file_count"] == len(per_file)
    assert {f["path"]: f["count"] for f in stats["top_files"]} == dict(per_file)
    assert stats["languages"] == dict(Counter(rec["file"]["language"] for rec in records))
    scores = [rec["match"]["score"] for rec in records]
    assert stats["score_range"] == {"min": min(scores), "max": max(scores)}
    assert r.structured["pagination"]["next_cursor"] == "offset:40"  # resumes at this page
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_stats_first_adds_the_block_to_the_normal_page(tmp_path: Path) -> None:
    records = make_records(30)
    r = make_layer(tmp_path / "out").render(make_page(records, page_size=10), *options(stats_first=True))
    res = r.structured["results"]
    assert list(res)[:3] == ["mode", "stats", "matches"]
    assert res["stats"]["total_count"] == 30 and res["stats"]["score_range"] is None
    assert res["matches"] == records[:10]


# -- offload failures ------------------------------------------------------------------------


def _assert_inline_fallback(r, records: list[Any], ceiling: int, reason: str) -> None:
    assert r.mode == "inline"
    assert estimate_tokens(r.text) <= ceiling
    res = r.structured["results"]
    assert res["truncated"] is True and res["matches"] == records[: res["count"]]
    assert r.structured["pagination"]["next_cursor"] == f"offset:{res['count']}"
    assert "could not be offloaded" in r.warnings[0] and reason in r.warnings[0]


def test_output_dir_that_is_a_file_falls_back_inline(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    records = make_records(200, content_chars=200)
    r = make_layer(blocker, max_tokens=3000).render(make_page(records), *options())
    _assert_inline_fallback(r, records, 3000, "not a directory")
    assert blocker.read_text() == "x"


def test_output_dir_under_a_file_falls_back_and_the_walk_stays_lossless(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    records = make_records(120, content_chars=200)
    layer = make_layer(tmp_path / "file" / "sub", max_tokens=3000)
    pages = walk(layer, records, 100, options())
    _assert_inline_fallback(pages[0], records, 3000, "Not a directory")
    assert [rec for p in pages for rec in p.structured["results"]["matches"]] == records


def test_output_dir_owned_by_someone_else_is_refused(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir(mode=0o777)
    os.chown(foreign, 4242, 4242)
    records = make_records(200, content_chars=200)
    r = make_layer(foreign, max_tokens=3000).render(make_page(records), *options())
    _assert_inline_fallback(r, records, 3000, "another user")
    assert list(foreign.iterdir()) == []


def test_a_write_failing_midway_leaves_no_file_and_falls_back(tmp_path: Path) -> None:
    """A real EFBIG from the kernel (file size limit), the same path as a full disk."""
    records = make_records(200, content_chars=200)
    layer = make_layer(tmp_path / "out", max_tokens=3000)
    (tmp_path / "out").mkdir()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
    try:
        r = layer.render(make_page(records), *options())
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_handler)
    _assert_inline_fallback(r, records, 3000, "too large")
    assert list((tmp_path / "out").iterdir()) == []


def test_everything_is_built_from_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = OffloadSettings(output_dir=tmp_path, max_tokens=1234, retention_hours=2)
    sql = SqlSettings(memory_limit="64MB", threads=2, timeout_s=3, max_rows=9)
    monkeypatch.setattr("server.output.layer.MAX_RESULT_BYTES", 4096)  # a constant, read when the layer is made
    store = OffloadStore.from_settings(s)
    assert (store.root, store.retention_s, store.max_read_bytes) == (tmp_path, 7200, MAX_ANSWER_BYTES)
    layer = OutputLayer(s, sql, store)
    assert layer.ceiling == Ceiling(1234, MAX_ANSWER_BYTES) and (layer.lists.max_rows, layer.lists.max_bytes) == (
        9,
        4096,
    )
    limits = Datasets(store, limits=sql).limits
    assert (limits.memory_limit, limits.threads, limits.timeout_s, limits.max_rows) == ("64MB", 2, 3, 9)


def test_an_output_dir_of_ours_open_to_others_is_made_0700(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A 0777 output dir used to be written into as it was, pages readable and replaceable by
    any local user; it is ours, so it is tightened before the first write, with a warning."""
    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    r = make_layer(loose, max_tokens=3000).render(make_page(make_records(200, content_chars=200)), *options())
    assert r.mode == "file_ref"
    assert stat.S_IMODE(loose.stat().st_mode) == 0o700
    assert any("was open to other users (mode 777); made it 0700" in m for m in caplog.messages)


def test_a_shared_sticky_output_dir_is_refused_not_tightened(tmp_path: Path) -> None:
    """A /tmp-like directory (1777) is shared by design: locking others out of it would break
    them, and writing into it would expose the pages. Refused; pages fall back to inline."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    records = make_records(200, content_chars=200)
    r = make_layer(shared, max_tokens=3000).render(make_page(records), *options())
    _assert_inline_fallback(r, records, 3000, "is a shared directory (mode 1777")
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777 and list(shared.iterdir()) == []
