"""Locating and running the real `rg`: where it is looked for, the error when it is missing,
and the time limit that must really kill it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra import Slots
from search_engine.config import DEFAULT_MAX_FILE_SIZE, EngineConfig
from search_engine.errors import InvalidQueryError, SearchError, SearchTimeoutError, ToolMissingError
from search_engine.regex.ripgrep import RipgrepRun, memory_cap, rg_path
from tests.index_helpers import REPO
from tests.slot_helpers import Overlap, all_slots_taken, counted_popens, run_at_once


@pytest.fixture
def fresh_lookup():
    """`rg_path` caches its answer; each test here needs its own lookup."""
    rg_path.cache_clear()
    yield
    rg_path.cache_clear()


def test_rg_beside_the_interpreter_wins(fresh_lookup) -> None:
    beside = Path(sys.executable).parent / "rg"
    assert beside.is_file(), "the ripgrep wheel installs rg next to the interpreter"
    assert rg_path() == str(beside)


def test_falls_back_to_path(fresh_lookup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = Path(sys.executable).parent / "rg"
    fake_python = tmp_path / "py" / "python"
    fake_python.parent.mkdir()
    on_path = tmp_path / "bin"
    on_path.mkdir()
    (on_path / "rg").symlink_to(real)
    monkeypatch.setattr(sys, "executable", str(fake_python))
    monkeypatch.setenv("PATH", str(on_path))
    assert rg_path() == str(on_path / "rg")


def test_missing_rg_says_how_to_install(fresh_lookup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolMissingError, match=r"pip install ripgrep==14\.1\.0"):
        rg_path()


def test_lookup_is_cached(fresh_lookup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = rg_path()
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert rg_path() == first


def test_records_are_whole_lines(tmp_path: Path) -> None:
    # Enough output to span many reads: each yielded buffer must end on a record boundary.
    (tmp_path / "a.txt").write_text("".join(f"line {i} needle\n" for i in range(50_000)))
    seen = 0
    with RipgrepRun(["--no-config", "needle"], tmp_path, EngineConfig(timeout_s=30)) as run:
        for buffer in run.records():
            assert buffer.endswith(b"\n")
            seen += buffer.count(b"\n")
        assert run.warnings(produced_output=seen > 0) == []
    assert seen == 50_000


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reopening through /proc is a Linux matter")
def test_rg_cannot_reopen_its_own_output_through_proc(tmp_path: Path) -> None:
    """An ignore file naming `/proc/self/fd/1` (git stores the link) had rg read its own output
    pipe, waiting for itself until the time limit. Its output is now a socket, which /proc will
    not open: rg reports that ignore file unreadable and searches on."""
    (tmp_path / "a.txt").write_text("needle\n")
    args = ["--no-config", "--ignore-file", "/proc/self/fd/1", "needle"]
    with RipgrepRun(args, tmp_path, EngineConfig(timeout_s=10)) as run:
        assert b"".join(run.records()) == b"a.txt:needle\n"
        assert not run.timed_out


def test_timeout_kills_rg(tmp_path: Path) -> None:
    # rg blocks opening a FIFO nobody writes to: only the time limit can end this search.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with RipgrepRun(["--no-config", "x", str(fifo)], tmp_path, EngineConfig(timeout_s=0.3)) as run:
        pid = run.pid
        with pytest.raises(SearchTimeoutError, match=r"took longer than 0.3s"):
            list(run.records())
        assert run.timed_out
    assert not Path(f"/proc/{pid}").exists(), "rg must be killed and reaped"


def test_bad_glob_is_the_callers_error(tmp_path: Path) -> None:
    with RipgrepRun(["--no-config", "--files", "--glob", "a{b"], tmp_path, EngineConfig(timeout_s=30)) as run:
        assert list(run.records()) == []
        with pytest.raises(InvalidQueryError, match=r"invalid glob.*a\{b"):
            run.warnings(produced_output=False)


def test_fatal_error_without_output_raises(tmp_path: Path) -> None:
    with RipgrepRun(["--no-config", "x", "does-not-exist"], tmp_path, EngineConfig(timeout_s=30)) as run:
        assert list(run.records()) == []
        with pytest.raises(SearchError, match="does-not-exist"):
            run.warnings(produced_output=False)


def test_per_file_errors_are_warnings_when_results_exist(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x\n")
    with RipgrepRun(["--no-config", "x", "a.txt", "gone.txt"], tmp_path, EngineConfig(timeout_s=30)) as run:
        assert b"".join(run.records()) == b"a.txt:x\n"
        warnings = run.warnings(produced_output=True)
    assert len(warnings) == 1 and warnings[0].startswith("gone.txt:")


def test_leaving_early_kills_rg(tmp_path: Path) -> None:
    """A consumer that fails mid-stream must not leave rg running."""
    (tmp_path / "a.txt").write_text("".join(f"needle {i}\n" for i in range(200_000)))
    with (
        pytest.raises(RuntimeError),
        RipgrepRun(["--no-config", "needle"], tmp_path, EngineConfig(timeout_s=30)) as run,
    ):
        pid = run.pid
        next(run.records())
        raise RuntimeError("consumer gave up")
    assert not Path(f"/proc/{pid}").exists()


def test_no_more_rg_than_the_cap_run_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing bounded how many rg ran at once: 8 regex searches whose rg each read /dev/zero
    as an ignore file took 5.7-7.1 GB. With a cap of 2, five searches never have more than 2
    rg running, and each gets its own answer."""
    for k in range(5):
        (tmp_path / f"{k}.txt").write_text(f"needle {k}\n")
    calls, cap = 5, 2
    overlap = Overlap(calls, cap)
    counted_popens(monkeypatch, overlap, hold=True)
    slots = Slots(cap, overlap)

    def search(k: int) -> bytes:
        args = ["--no-config", f"needle {k}"]
        with RipgrepRun(args, tmp_path, EngineConfig(timeout_s=60), slots) as run:
            return b"".join(run.records())

    results = run_at_once(calls, search)
    assert overlap.most == cap and overlap.now == 0
    assert results == {k: f"{k}.txt:needle {k}\n".encode() for k in range(calls)}


def test_a_run_that_waits_out_its_time_for_a_slot_fails_saying_so(tmp_path: Path, monkeypatch) -> None:
    """A search over the cap waits for a slot within its own time limit, then fails saying the
    others ran all that time, having started no rg; the slot it never had is not given back."""
    busy = r"waited 5s for ripgrep and did not start: other searches held all 1 of the ripgrep runs allowed at once"
    with all_slots_taken(monkeypatch, step=6.0) as (slots, overlap):  # the waiter's time is up at its first look
        for _ in range(2):
            with pytest.raises(SearchTimeoutError, match=busy):
                RipgrepRun(["--no-config", "x"], tmp_path, EngineConfig(timeout_s=5), slots)
    assert overlap.most == 0
    with RipgrepRun(["--no-config", "--files"], tmp_path, EngineConfig(timeout_s=5), slots) as run:
        assert list(run.records()) == []


_DEV_ZERO_PROBE = """
import json, resource, sys
from pathlib import Path
from search_engine.config import EngineConfig
from search_engine.errors import SearchError
from search_engine.regex.ripgrep import RipgrepRun
args = ["--no-config", "--ignore-file", "/dev/zero", "x"]
try:
    with RipgrepRun(args, Path(sys.argv[1]), EngineConfig(timeout_s=60)) as run:
        failure = f"no error: {list(run.records())}, {run.warnings(False)}"
except SearchError as exc:
    failure = str(exc)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"failure": failure, "rg_peak_bytes": peak}))
"""


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(__import__("resource"), "prlimit"), reason="the cap needs Linux's prlimit")
def test_rg_is_held_to_a_few_hundred_mb(tmp_path: Path) -> None:
    """Whatever an rg run is made to read (here /dev/zero as an ignore file, which has no line
    end: rg doubles a buffer looking for one), it is held to `memory_cap`, 196 MiB by default
    (it was 2 GiB: 4 searches at once took 3.1 GB), and its abort fails the search with the
    likely cause named. The probe runs in a process of its own under a 6 GiB address-space
    limit, so a broken cap fails the test (rg's peak) rather than the machine."""
    (tmp_path / "a.txt").write_text("x\n")
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))\n"
    probe = subprocess.run(
        [sys.executable, "-c", limit + _DEV_ZERO_PROBE, str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr[-2000:]
    seen = json.loads(probe.stdout)
    assert seen["failure"].startswith("ripgrep stopped before the end (killed by SIGABRT"), seen["failure"]
    assert memory_cap(DEFAULT_MAX_FILE_SIZE) == 196 << 20
    assert seen["rg_peak_bytes"] <= 1.1 * memory_cap(DEFAULT_MAX_FILE_SIZE)
