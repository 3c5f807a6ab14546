"""Hostile patterns through the real MCP path: catastrophic backtracking (ripgrep's engine is
linear-time; Python's backtracking `re` on the same input is shown not to finish), huge patterns,
patterns the OS or rg cannot take, and patterns matching every line of a large tree (bounded by
max_results and marked truncated)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from server.app import build_app
from tests.hostile_helpers import SyncClient
from tests.server_helpers import make_settings, page_matches, structured

EVIL_LINE = "a" * 5000 + "!"
FILES, LINES = 100, 400  # 40,000 lines for the match-everything case
MAX_RESULTS = 3000


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("patterns") / "repo"
    (root / "big").mkdir(parents=True)
    (root / "evil.txt").write_text(f"{EVIL_LINE}\n{'a' * 5000}\n")
    for i in range(FILES):
        (root / "big" / f"f{i:03d}.txt").write_text("".join(f"line {j} of file {i}\n" for j in range(LINES)))
    return root


@pytest.fixture(scope="module")
def client(tree, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("patterns-settings")
    sync = SyncClient(build_app(make_settings(tree, tmp, search={"max_results": MAX_RESULTS, "timeout_s": 60})))
    yield sync
    sync.close()


@pytest.mark.slow
def test_catastrophic_backtracking_pattern_completes(client, tree):
    """`(a+)+$` against 5,000 a's and a '!': exponential for a backtracking engine. Python's
    `re` is given 3 s in a subprocess and does not finish; the search answers, correctly."""
    probe = "import re, sys; re.search(r'(a+)+$', sys.argv[1])"
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-c", probe, EVIL_LINE], timeout=3)
    body = structured(client.call("regex_search", {"pattern": "(a+)+$", "path": "evil.txt", "detail": "full"}))
    (m,) = page_matches(body)  # only the second line (no '!') matches
    assert m["match"]["line_number"] == 2
    assert body["metadata"]["search_time_ms"] < 30_000  # generous: the point is it returns at all


# Nested and overlapping repetitions over a run of a's that the pattern cannot match. The
# Unicode \b next to a non-ASCII letter keeps ripgrep off its literal and reverse-suffix
# shortcuts (the plain `(a+)+$` is answered without looking at the run) and in its general
# engine, so its time follows the input; a backtracking engine tries every split of the run.
LINEAR_PATTERNS = [r"(a+)+\b\d", r"(a|aa)*\b\d"]
RUN = 250_000  # ~50-500 ms of ripgrep per search at 1x and 4x on the 2-core VM


def run_text(n: int) -> str:
    return f"{'a' * n}é!\n" * 2


def min_time(runs: int, timed: Callable[[], float]) -> float:
    return min(timed() for _ in range(runs))


def python_re_seconds(pattern: str, n: int) -> float:
    text = run_text(n)
    started = time.perf_counter()
    assert re.search(pattern, text) is None
    return time.perf_counter() - started


@pytest.mark.slow
@pytest.mark.parametrize("pattern", LINEAR_PATTERNS)
def test_regex_time_grows_linearly_where_backtracking_explodes(tmp_path, pattern):
    """4x the run costs the search under 8x the time (min of 3 runs, interleaved), while
    Python's backtracking `re` takes far more than 8x longer for 8 more a's."""
    backtracking = min_time(3, lambda: python_re_seconds(pattern, 20)) / min_time(
        3, lambda: python_re_seconds(pattern, 12)
    )
    assert backtracking > 8, backtracking

    root = tmp_path / "repo"
    root.mkdir()
    for size in (RUN, 4 * RUN):
        (root / f"run{size}.txt").write_text(run_text(size))
    settings = make_settings(root, tmp_path, search={"max_file_size": 16 * RUN, "timeout_s": 60})
    sync = SyncClient(build_app(settings))

    def search_ms(size: int) -> float:
        body = structured(sync.call("regex_search", {"pattern": pattern, "path": f"run{size}.txt", "detail": "full"}))
        assert body["results"]["total_count"] == 0
        return float(body["metadata"]["search_time_ms"])

    try:
        times: dict[int, list[float]] = {RUN: [], 4 * RUN: []}
        for _ in range(3):
            for size, seen in times.items():
                seen.append(search_ms(size))
    finally:
        sync.close()
    small, large = min(times[RUN]), min(times[4 * RUN])
    assert large / small < 8, times


def test_a_100_kb_alternation_is_answered(client):
    words = [f"word{i:05d}" for i in range(10_000)]
    pattern = "|".join([*words, "line 7 of file 42"])
    assert 100_000 < len(pattern) < 128 * 1024
    result = client.call("regex_search", {"pattern": pattern, "page_size": 5})
    body = structured(result)
    assert [m["text"] for m in page_matches(body)] == ["line 7 of file 42"]
    # The pattern is not echoed back in full: the answer stays small.
    assert len(result.content[0].text) < 5_000
    assert body["search"]["query"].endswith(f"({len(pattern)} characters)")


def test_a_pattern_too_long_for_the_command_line_is_a_clear_error(client):
    result = client.call("regex_search", {"pattern": "x" * 200 * 1024}, raise_on_error=False)
    assert result.is_error
    error = result.structured_content["error"]
    assert error["code"] == "invalid_query"
    assert "too long" in error["message"]
    # past the argument's own bound (256 KiB), refused before ripgrep is started
    message = client.refused("regex_search", {"pattern": "x" * 2 * 1024 * 1024})
    assert "pattern: is 2,097,152 characters long, and at most 262,144 are taken" in message, message


def test_too_many_globs_for_the_command_line_are_named_as_the_problem(client):
    """Before: the error blamed the longest argument ("an argument of 0 KiB") and said to
    shorten the 6-character pattern."""
    result = client.call(
        "regex_search", {"pattern": "needle", "include_patterns": ["x" * 3_000] * 1_000}, raise_on_error=False
    )
    assert result.is_error
    error = result.structured_content["error"]
    assert error["code"] == "invalid_query"
    assert (
        "of them globs" in error["message"]
        and "0 KiB" not in error["message"]
        and "fewer include or exclude patterns" in error["message"]
    )


def test_a_pattern_whose_compiled_form_is_too_big_is_a_clear_error(client):
    result = client.call("regex_search", {"pattern": r"\w{1000}{1000}"}, raise_on_error=False)
    assert result.is_error
    error = result.structured_content["error"]
    assert error["code"] == "invalid_query" and "size limit" in error["message"]


@pytest.mark.parametrize("pattern", ["a\x00b", "\ud800", "line\ud83d"], ids=["nul", "lone-surrogate", "half-pair"])
def test_patterns_no_process_can_receive_are_refused_clearly(client, pattern):
    message = client.refused("regex_search", {"pattern": pattern})
    assert "NUL" in message or "surrogate" in message
    # each problem as the settings errors read, `argument: what is wrong`, naming the tool's own
    # argument (it used to be `query Value error, contains ...`: the engine's field, pydantic's wording)
    assert "Value error" not in message and ("pattern: " in message or "surrogate" in message), message


@pytest.mark.parametrize("field", ["include_patterns", "exclude_patterns"])
def test_globs_no_process_can_receive_are_refused_clearly(client, field):
    message = client.refused("regex_search", {"pattern": "x", field: ["*.py\x00"]})
    assert "NUL" in message and "Value error" not in message and f"{field}: " in message, message


@pytest.mark.parametrize("pattern", [".", "^", "x*"], ids=["any-char", "line-start", "empty-match"])
def test_matching_every_line_is_bounded_and_marked_truncated(client, pattern):
    body = structured(client.call("regex_search", {"pattern": pattern, "path": "big", "page_size": 200}))
    results = body["results"]
    assert results["truncated"] is True
    assert results["total_count"] == MAX_RESULTS  # the list pages walk: bounded
    assert body["pagination"]["total_pages"] == MAX_RESULTS // 200
    assert results["count"] == 200
