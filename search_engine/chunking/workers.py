"""The processes that chunk an index build's files, each under a memory limit.

Every file with a grammar is parsed by tree-sitter, and a file's parse can cost far more than
its size: 32,760 bytes of `a<` in Java took 2.6 GB (`a<b<` in C#, `a<b,` in TypeScript 1.3-2.6
GB), super-linearly (8 KB 280 MB, 16 KB 1 GB). tree-sitter takes it in one step at the end
of the input, with no progress report in between, so nothing in the parsing process can stop
it, and it crashes (SIGSEGV) rather than fail when an allocation does. So no parse runs in the
indexing process (the server, `codepager index`): every one runs in a worker whose data
size is limited (`RLIMIT_DATA`) to what it holds once started plus `PARSE_MEMORY_BUDGET`. The
worst real file seen, a 1 MB one-line minified script, takes ~165 MB over that start (the
limit also holds the batch of results a worker sends back, see `search_engine.chunking.jobs`); a
parse past it kills the worker, not the indexer, and `chunk_jobs` indexes that file as plain
text and says so.

Workers are forked by a forkserver that has imported the chunker already, so a pool is ready
in ~10 ms (0.4-0.8 s when each worker imports it): a server re-chunking the one file saved
starts one for it. The forkserver itself starts with the first pool, once a process.
A worker never inherits the indexer's threads or locks, and ends when the indexer does.

The limit needs Linux (/proc and `RLIMIT_DATA` counting every private mapping, since 4.7);
elsewhere (macOS) workers run without it.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import select
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import forkserver
from types import ModuleType

#: What a chunking worker may allocate beyond what it holds once started: the bound on every
#: parse, with the results of its batch. Real code takes a few MB a 100 KB (fmtlib's 164 KB
#: format.h: 7 MB), a 1 MB minified line ~165 MB; an ambiguous input takes thousands of bytes
#: a byte (see the module docstring).
PARSE_MEMORY_BUDGET = 256 << 20

# forkserver: workers never inherit this process's threads or locks.
_CONTEXT = multiprocessing.get_context("forkserver")


def chunking_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of `workers` chunking processes, each limited and tied to this process."""
    _CONTEXT.set_forkserver_preload(_preloads())  # read when the forkserver starts: with the first pool
    return ProcessPoolExecutor(workers, mp_context=_CONTEXT, initializer=_start_worker, initargs=(os.getpid(),))


def start_forkserver() -> None:
    """Start the forkserver now rather than with the first pool, which waits for its imports
    (0.4-1 s): a build calling this before it lists files and loads its model has them done
    meanwhile. A no-op once it runs."""
    _CONTEXT.set_forkserver_preload(_preloads())
    forkserver.ensure_running()


def _preloads() -> list[str]:
    """What the forkserver imports once, for every worker it forks: the chunker, and the modules
    the main module takes names from. A worker runs the main module again (as `__mp_main__`:
    Python 3.11's forkserver never preloads `__main__` itself), and `codepager`'s does `from
    server.cli import main`, 0.4 s in each worker unless the forkserver imported it already."""
    taken = vars(sys.modules["__main__"]).values() if "__main__" in sys.modules else ()
    names = {v.__name__ if isinstance(v, ModuleType) else getattr(v, "__module__", None) for v in taken}
    return [
        "search_engine.chunking.jobs",
        *sorted(n for n in names if isinstance(n, str) and n in sys.modules and n != "__main__"),
    ]


def _start_worker(indexer: int) -> None:
    """Worker initializer: end with the indexer, then limit what the worker may allocate."""
    _exit_with(indexer)
    _limit_memory(PARSE_MEMORY_BUDGET)


def _limit_memory(budget: int) -> None:
    """Limit this process's data size to its current one plus `budget`, and write no core
    file when it dies of it (a core of a worker at its limit is hundreds of MB, in whatever
    directory the indexer was started from)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    held = _data_size()
    if held is None:
        return  # no /proc (macOS): no limit the kernel would keep to
    _soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = held + budget if hard == resource.RLIM_INFINITY else min(held + budget, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


def _data_size() -> int | None:
    """This process's data size in bytes (`VmData`: what `RLIMIT_DATA` counts), or None."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmData:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _exit_with(pid: int) -> None:
    """End this worker when the indexing process `pid` ends. Every worker holds both ends of
    the pool's queues, so one blocked on them never sees its indexer die: after a SIGKILL of
    the indexer, the workers and their forkserver stayed forever."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(1)
    except (AttributeError, OSError):  # no pidfd (not Linux 5.3+): look once a second
        fd = None

    def watch() -> None:
        if fd is not None:
            select.select([fd], [], [])  # readable once the process has exited
        else:
            while _alive(pid):
                time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="codepager-indexer-watch", daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
