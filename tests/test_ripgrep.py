"""Locating and running the real `rg`: where it is looked for, the error when it is missing,
and the time limit that must really kill it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from search_engine.errors import InvalidQueryError, SearchError, SearchTimeoutError, ToolMissingError
from search_engine.ripgrep import RipgrepRun, rg_path


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
    with RipgrepRun(["--no-config", "needle"], tmp_path, timeout_s=30) as run:
        for buffer in run.records():
            assert buffer.endswith(b"\n")
            seen += buffer.count(b"\n")
        assert run.warnings(produced_output=seen > 0) == []
    assert seen == 50_000


@pytest.mark.skipif(sys.platform != "linux", reason="pipe sizes are a Linux knob")
def test_rg_output_pipe_is_grown(tmp_path: Path) -> None:
    # A bigger pipe lets rg's threads run ahead of the parser instead of idling a core.
    import fcntl

    (tmp_path / "a.txt").write_text("needle\n")
    with RipgrepRun(["--no-config", "needle"], tmp_path, timeout_s=30) as run:
        assert fcntl.fcntl(run._stdout.fileno(), fcntl.F_GETPIPE_SZ) == 1024 * 1024
        assert b"".join(run.records()) == b"a.txt:needle\n"


def test_timeout_kills_rg(tmp_path: Path) -> None:
    # rg blocks opening a FIFO nobody writes to: only the time limit can end this search.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with RipgrepRun(["--no-config", "x", str(fifo)], tmp_path, timeout_s=0.3) as run:
        pid = run.pid
        with pytest.raises(SearchTimeoutError, match=r"took longer than 0.3s"):
            list(run.records())
        assert run.timed_out
    assert not Path(f"/proc/{pid}").exists(), "rg must be killed and reaped"


def test_bad_glob_is_the_callers_error(tmp_path: Path) -> None:
    with RipgrepRun(["--no-config", "--files", "--glob", "a{b"], tmp_path, timeout_s=30) as run:
        assert list(run.records()) == []
        with pytest.raises(InvalidQueryError, match=r"invalid glob.*a\{b"):
            run.warnings(produced_output=False)


def test_fatal_error_without_output_raises(tmp_path: Path) -> None:
    with RipgrepRun(["--no-config", "x", "does-not-exist"], tmp_path, timeout_s=30) as run:
        assert list(run.records()) == []
        with pytest.raises(SearchError, match="does-not-exist"):
            run.warnings(produced_output=False)


def test_per_file_errors_are_warnings_when_results_exist(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x\n")
    with RipgrepRun(["--no-config", "x", "a.txt", "gone.txt"], tmp_path, timeout_s=30) as run:
        assert b"".join(run.records()) == b"a.txt:x\n"
        warnings = run.warnings(produced_output=True)
    assert len(warnings) == 1 and warnings[0].startswith("gone.txt:")


def test_leaving_early_kills_rg(tmp_path: Path) -> None:
    """A consumer that fails mid-stream must not leave rg running."""
    (tmp_path / "a.txt").write_text("".join(f"needle {i}\n" for i in range(200_000)))
    with pytest.raises(RuntimeError), RipgrepRun(["--no-config", "needle"], tmp_path, timeout_s=30) as run:
        pid = run.pid
        next(run.records())
        raise RuntimeError("consumer gave up")
    assert not Path(f"/proc/{pid}").exists()
