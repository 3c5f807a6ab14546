"""The child process that runs one jq_filter on libjq (the `jq` PyPI binding).

Started by `server.jq.sandbox.apply_jq` as `python -I worker.py MEMORY_BYTES`, with an
empty environment and an empty working directory. It is run as a script, not imported as
`server.jq.worker`, so it loads nothing but the standard library and `jq`: no server
code, no settings, no secrets. Everything arrives on stdin:

    line 1   the filter, as one JSON string
    the rest the input, one JSON value (the list of records)

It then limits its own address space to what it already uses plus MEMORY_BYTES (so the filter,
including jq's parse of the input, gets that much whatever the interpreter's own footprint) and
writes one compact JSON line per value the filter yields, as it yields them, so the parent can
stop it at its output cap. The parent kills it at its time limit.

Exit status: 0 done, 3 the filter does not compile, 5 it failed at run time (jq's own codes),
125 the limit could not be set. libjq aborts with "cannot allocate memory" on stderr when the
address-space limit stops it.
"""

from __future__ import annotations

import json
import os
import sys
from typing import NoReturn

COMPILE_ERROR, RUN_ERROR, SETUP_ERROR = 3, 5, 125


def _address_space() -> int:
    """Bytes of address space this process maps now (Linux: /proc/self/statm, in pages)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0  # no procfs: the limit is then MEMORY_BYTES of the whole process


def _fail(status: int, message: str) -> NoReturn:
    sys.stderr.write(message.rstrip() + "\n")
    sys.stderr.flush()
    os._exit(status)


def main() -> None:
    import resource  # POSIX only: imported here so the server can import this module's constants

    # Python put LC_CTYPE back (PEP 538) into the empty environment it was given; jq's $ENV
    # and env must see nothing at all.
    os.environ.clear()
    memory_bytes = int(sys.argv[1])
    import jq  # after clearing: nothing of the parent's environment reaches libjq

    stdin = sys.stdin.buffer
    expression = json.loads(stdin.readline())
    text = stdin.read().decode("utf-8")
    try:
        limit = _address_space() + memory_bytes
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ValueError, OSError) as exc:
        _fail(SETUP_ERROR, f"could not set the memory limit: {exc}")
    try:
        program = jq.compile(expression)
    except ValueError as exc:
        _fail(COMPILE_ERROR, str(exc))
    out = sys.stdout.buffer
    try:
        for value in program.input_text(text):
            out.write(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")
        out.flush()
    except MemoryError:
        _fail(RUN_ERROR, "jq: error: cannot allocate memory")
    except RecursionError:
        _fail(RUN_ERROR, "jq: error: a value it produced is nested too deeply to be written as JSON")
    except ValueError as exc:
        _fail(RUN_ERROR, f"jq: error: {exc}")
    except BrokenPipeError:
        os._exit(RUN_ERROR)  # the parent stopped reading (output cap): nothing more to say
    except Exception as exc:  # never a traceback: it would go back to the client with our paths
        _fail(RUN_ERROR, f"jq: error: {type(exc).__name__}")


if __name__ == "__main__":
    main()
