"""`codepager serve` ends cleanly when its client goes away early, whatever the background
indexer is doing: status 0, within 2 s of stdin closing, never SIGABRT.

Before `serve_cmd.end_process`, the interpreter was finalized while the indexer thread was in
native code (safetensors loading the model, tokenizers embedding): the thread's forced unwind
met a PyO3 `catch_unwind` and glibc aborted ("FATAL: exception not rethrown") in about one
start in six with stdin at EOF, and the chunking pool's exit hook sometimes held the exit for
over 10 s. Each start here is a real subprocess on a fresh cache dir, so the index build is
under way (model, listing, chunking workers, embedding, depending on how long the client
stayed) when stdin closes; the two kinds are what `serve < /dev/null` and `claude mcp list`
(initialize, tools/list, EOF) do.
"""

from __future__ import annotations

import json
import resource
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest

from harness.commands import codepager_cmd
from tests.code_tree import write_code_tree
from tests.server_helpers import serve_env

STARTS = 25  # of each kind: 50 in all
EXIT_WITHIN_S = 2.0
START_UP_S = 120.0  # imports on a loaded two-core machine; not what is measured
# How long the client stays after tools/list, cycled over the starts, so stdin closes at
# different points of the build.
STAYS_S = (0.0, 0.2, 0.5, 1.0, 2.0)
# The server's debug line once its lifespan runs (the indexer just started): with stdin at
# EOF from the start, the exit is timed from here, after the imports.
SERVING = "serving 1 root(s); indexing on start: True"
INITIALIZE = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "exit-test", "version": "1"}}


@pytest.fixture(scope="module")
def big_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Enough files for the chunking worker processes (`chunk_jobs.POOL_MIN_FILES`) and a
    build of many seconds."""
    return write_code_tree(tmp_path_factory.mktemp("big") / "repo", files=800, hits_per_file=40)


def _no_core_files() -> None:
    """A failing start must not leave a core file behind (in the child, before exec)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _start(tree: Path, tmp: Path, stdin: int | IO[Any]) -> subprocess.Popen[bytes]:
    cmd, args = codepager_cmd()
    env = serve_env(tmp, index__index_on_start="true")
    return subprocess.Popen(
        [cmd, *args, "serve", "--root", str(tree), "--log-level", "DEBUG"],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp,
        preexec_fn=_no_core_files,
    )


class _Stderr:
    """Drains a server's stderr in a thread (a full pipe would block it) and notes when the
    `SERVING` line arrived."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.lines: list[str] = []
        self.serving = threading.Event()
        self.serving_at = 0.0
        assert proc.stderr is not None
        self._thread = threading.Thread(target=self._read, args=(proc.stderr,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        for raw in stream:
            line = raw.decode(errors="replace")
            if SERVING in line and not self.serving.is_set():
                self.serving_at = time.monotonic()
                self.serving.set()
            self.lines.append(line)

    def text(self) -> str:
        self._thread.join(timeout=10)
        return "".join(self.lines)


def _exit_time(proc: subprocess.Popen[bytes], since: float) -> float:
    try:
        proc.wait(timeout=EXIT_WITHIN_S + 30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return time.monotonic() - since


def _rpc(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def _answer(proc: subprocess.Popen[bytes], request_id: int) -> dict[str, Any]:
    assert proc.stdout is not None
    while line := proc.stdout.readline():
        message: dict[str, Any] = json.loads(line)
        if message.get("id") == request_id:
            return message
    raise AssertionError(f"stdout closed before the answer to request {request_id}")


def _with_stdin_at_eof(tree: Path, tmp: Path) -> tuple[int | None, float, str]:
    proc = _start(tree, tmp, subprocess.DEVNULL)
    stderr = _Stderr(proc)
    if not stderr.serving.wait(START_UP_S):
        proc.kill()
        proc.wait()
        return proc.returncode, float("inf"), stderr.text()
    elapsed = _exit_time(proc, stderr.serving_at)
    return proc.returncode, elapsed, stderr.text()


def _listing_then_eof(tree: Path, tmp: Path, stay_s: float) -> tuple[int | None, float, str]:
    proc = _start(tree, tmp, subprocess.PIPE)
    stderr = _Stderr(proc)
    _rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE})
    assert "result" in _answer(proc, 1)
    _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    _rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert _answer(proc, 2)["result"]["tools"]
    time.sleep(stay_s)  # the client's stay: where the build has got to when stdin closes
    assert proc.stdin is not None
    proc.stdin.close()
    elapsed = _exit_time(proc, time.monotonic())
    return proc.returncode, elapsed, stderr.text()


@pytest.mark.slow
def test_serve_exits_cleanly_and_at_once_when_stdin_closes_during_indexing(big_tree: Path, tmp_path: Path) -> None:
    failures = []
    for i in range(2 * STARTS):
        tmp = tmp_path / f"start{i}"  # a fresh cache dir: every start builds from scratch
        tmp.mkdir()
        if i % 2 == 0:
            kind = "stdin at EOF"
            status, elapsed, stderr = _with_stdin_at_eof(big_tree, tmp)
        else:
            stay = STAYS_S[(i // 2) % len(STAYS_S)]
            kind = f"initialize + tools/list, {stay} s, EOF"
            status, elapsed, stderr = _listing_then_eof(big_tree, tmp, stay)
        if status != 0 or elapsed > EXIT_WITHIN_S or "FATAL" in stderr or "Traceback" in stderr:
            failures.append(f"start {i} ({kind}): status {status} after {elapsed:.1f} s\n{stderr[-1500:]}")
    assert not failures, f"{len(failures)} of {2 * STARTS} starts did not end cleanly:\n" + "\n".join(failures)
