"""`jq_filter`: an agent's jq expression applied to a result list, safely.

The expression comes from a model that may have read hostile text, so it runs as untrusted
code, with layered limits:
1. a lexer rejects the builtins that reach outside the input ($ENV, env, input_filename,
   $__loc__, input/inputs, debug/stderr, import/include, module metadata, search paths),
   looking inside string interpolations (`"\\(env)"`) but not inside plain strings or after a
   `.` (so `test("env")` and `.env` are fine);
2. libjq (the `jq` PyPI binding: no jq program needs to be installed) runs in a child Python
   process (`worker.py`, run as a script so it loads no server code) with an empty
   environment, no inherited file descriptors, an empty working directory, the filter and the
   input on stdin (so nothing is parsed as an option), an address-space limit it sets on
   itself, and a wall-clock timeout after which it is killed: a runaway filter takes down the
   child, never the server. At most `MAX_WORKERS` workers run at once (`Slots`); a
   filter past it waits for one, within its timeout;
3. output is read with a cap, so `range(1e9)` cannot fill the server's memory.

The input is the list of records as one JSON array. Both styles work: a filter that yields one
array (`map(select(...))`) gives that array; one that yields a stream (`.[] | select(...)`)
gives the list of its outputs.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from infra import Slots
from server.errors import JqFilterError, JqTimeoutError
from server.jq import worker
from server.output import dumps_bytes
from server.settings import JqSettings

#: Builtins and keywords that read the environment, files, other inputs or write to stderr.
FORBIDDEN_NAMES = frozenset(
    {
        "env",
        "input_filename",
        "input",
        "inputs",
        "debug",
        "stderr",
        "import",
        "include",
        "modulemeta",
        "get_search_list",
        "get_prog_origin",
        "get_jq_origin",
        "halt_error",
    }
)
FORBIDDEN_VARIABLES = frozenset({"ENV"})
#: Memory (MiB of address space) a filter may use on top of its worker's own. Not a setting
#: (it was `jq.memory_mb`): a filter over one result list, which is bounded in size, needs a
#: fraction of this; only a runaway (`[range(1e9)]`) reaches it, and is stopped either way.
MEMORY_MB = 512
#: Workers running at once (it was `jq.max_concurrent`): the cap times `MEMORY_MB` bounds them
#: all (1 GiB), and 2 matches a 2-core machine, where a third CPU-bound filter would only slow
#: the others down. Filters are short (~0.1 s, mostly the worker's start), so a few waiting
#: cost little. Read when the slots are made (a test patches it).
MAX_WORKERS = 2
DEFAULT_MAX_OUTPUT_BYTES = 64 << 20
#: What a `keep_only` filter is told when it makes more than it was given.
KEEP_ONLY = "it may only filter, sort or slice the matches, e.g. map(select(...)) or .[:10]"
MAX_EXPRESSION_CHARS = 10_000

#: The child that runs libjq (see its docstring for the protocol): `python -I` ignores PYTHON*
#: variables and the user's site directory, and puts no script directory on sys.path.
_WORKER = worker.__file__
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*")


def _skip_string(expression: str, i: int) -> tuple[int, bool]:
    """Scan string text from index `i` (just inside a literal) to the closing quote or to the
    next `\\(`; returns (the index after it, whether an interpolation was entered)."""
    n = len(expression)
    while i < n:
        c = expression[i]
        if c == "\\":
            if i + 1 < n and expression[i + 1] == "(":
                return i + 2, True
            i += 2
            continue
        i += 1
        if c == '"':
            return i, False
    raise JqFilterError("jq_filter has an unterminated string literal")


def _code_identifiers(expression: str) -> list[str]:
    """Every identifier in code position: not in comments, plain string text or a field name
    right after `.`, but including those inside `\\(...)` interpolations, which are code."""
    out: list[str] = []
    open_interpolations: list[int] = []  # paren depth at which each open interpolation ends
    depth = 0
    i, n = 0, len(expression)
    while i < n:
        c = expression[i]
        entered = False
        if c == "#":
            end = expression.find("\n", i)
            i = n if end < 0 else end + 1
        elif c == '"':
            i, entered = _skip_string(expression, i + 1)
        elif c == "(":
            depth += 1
            i += 1
        elif c == ")":
            depth -= 1
            i += 1
            if open_interpolations and depth == open_interpolations[-1]:
                open_interpolations.pop()
                i, entered = _skip_string(expression, i)
        elif (m := _IDENT.match(expression, i)) and not (
            i and (expression[i - 1].isalnum() or expression[i - 1] == "_")
        ):
            if expression[i - 1 : i] != ".":
                out.append(m.group(0).rsplit("::", 1)[-1])
            i = m.end()
        else:
            i += 1
        if entered:
            open_interpolations.append(depth)
            depth += 1
    return out


def check_expression(expression: str) -> None:
    """Raise JqFilterError if `expression` may read the environment, files or other inputs.

    `$ENV` and `$__loc__` are refused by name whether or not the `$` is adjacent (jq 1.6 also
    accepts `$ ENV`); no builtin is called ENV or starts with `__`, so nothing legitimate is lost.
    """
    if not expression.strip():
        raise JqFilterError("jq_filter is empty; pass a jq expression such as 'map(select(.score > 0.5))'")
    if "\x00" in expression:  # libjq reads a C string: what follows a NUL would be dropped unseen
        raise JqFilterError("jq_filter may not contain a NUL character")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise JqFilterError(f"jq_filter is longer than {MAX_EXPRESSION_CHARS} characters")
    for name in _code_identifiers(expression):
        if name in FORBIDDEN_VARIABLES or name.startswith("__"):
            raise JqFilterError(
                f"jq_filter may not use ${name}: filters cannot read the environment or source locations"
            )
        if name in FORBIDDEN_NAMES:
            raise JqFilterError(
                f"jq_filter may not use {name!r}: filters see only the result list (no environment, files, "
                "extra inputs or stderr)"
            )


def apply_jq(
    records: Sequence[Any],
    expression: str,
    *,
    limits: JqSettings | None = None,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    keep_only: bool = False,
    workers: Slots | None = None,
) -> list[Any]:
    """The values `expression` produces from `records` (see the module docstring for the shape).

    `keep_only`: the filter may only keep records (filter, sort, slice), so its output is
    capped at about the input's size, not `max_output_bytes`: `.[0] as $m | [range(150000) |
    $m]` made one match 150,000 (230 MB of the server's memory), past every result limit.
    `limits`: the `[jq]` settings the filter runs under (their defaults without, read now).
    `workers`: the slots the worker runs in, shared by the calls that are to be capped together
    (the server's `jq_view` makes one); without, this call has slots of its own. The timeout
    counts by their clock, from before the wait for a slot, so it covers that wait too."""
    check_expression(expression)
    limits = limits or JqSettings()
    workers = workers or Slots(MAX_WORKERS)
    timeout_s, memory_mb = limits.timeout_s, MEMORY_MB
    argv = [sys.executable, "-I", _WORKER, str(memory_mb << 20)]
    body = dumps_bytes(list(records))
    # slack: the worker's JSON may spell a number or an escape longer than ours
    cap = min(max_output_bytes, len(body) + len(body) // 8 + 4096) if keep_only else max_output_bytes
    with (
        tempfile.TemporaryDirectory(prefix="codepager-jq-") as work,
        tempfile.TemporaryFile() as stdin,
        tempfile.TemporaryFile() as stderr,
    ):
        stdin.write(json.dumps(expression).encode("utf-8") + b"\n")
        stdin.write(body)
        stdin.seek(0)
        deadline = workers.clock() + timeout_s
        with workers.hold(deadline, lambda: _busy(timeout_s, workers.size)):
            proc = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=stderr, cwd=work, env={})
            out = _read_capped(
                proc, deadline, workers.clock, timeout_s, cap, keep_only=keep_only and cap < max_output_bytes
            )
        # its last 4,000 bytes: what went wrong is said last (a traceback's final line)
        stderr.seek(max(0, stderr.seek(0, os.SEEK_END) - 4000))
        err = stderr.read().decode("utf-8", "replace").strip()
    if proc.returncode != 0:
        raise JqFilterError(_explain_failure(err, proc.returncode, memory_mb))
    return _collect(out)


def _busy(timeout_s: float, workers: int) -> JqTimeoutError:
    """The timeout of a filter that waited its whole time for a worker and never ran."""
    return JqTimeoutError(
        f"jq_filter waited {timeout_s:g} s for a worker and was not run: the server was busy with other filters "
        f"(it runs {workers} at once); try again"
    )


def _read_capped(
    proc: subprocess.Popen[bytes],
    deadline: float,
    clock: Callable[[], float],
    timeout_s: float,
    max_bytes: int,
    *,
    keep_only: bool,
) -> bytes:
    """Everything the process writes to stdout, killing it at `deadline` by `clock` (the
    `timeout_s` its call had) or when over the cap; it has exited when this returns or raises."""
    assert proc.stdout is not None
    too_slow = JqTimeoutError(
        f"jq_filter ran longer than {timeout_s:g} s and was stopped; simplify it or filter less data"
    )
    chunks: list[bytes] = []
    size = 0
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        try:
            while True:
                remaining = deadline - clock()
                if remaining <= 0:
                    raise too_slow
                if not sel.select(remaining):
                    continue
                chunk = os.read(proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    break
                size += len(chunk)
                if size > max_bytes:
                    raise JqFilterError(
                        f"jq_filter produced more than its input and was stopped: {KEEP_ONLY}"
                        if keep_only
                        else f"jq_filter produced more than {max_bytes >> 20} MiB of output and was stopped"
                    )
                chunks.append(chunk)
            try:
                proc.wait(max(0.1, deadline - clock()))
            except subprocess.TimeoutExpired:
                raise too_slow from None
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        finally:
            proc.stdout.close()
    return b"".join(chunks)


def _explain_failure(stderr: str, returncode: int, memory_mb: int) -> str:
    if "Traceback (most recent call last)" in stderr:  # the worker died outside its handlers:
        stderr = stderr.splitlines()[-1]  # its last line says what; the rest names our files
    if returncode == worker.COMPILE_ERROR:
        return f"jq_filter does not compile: {stderr}"
    if returncode < 0 or "cannot allocate memory" in stderr:
        return f"jq_filter failed (exit {returncode}), probably over its {memory_mb} MiB memory limit: {stderr}"
    return f"jq_filter failed at run time: {stderr or f'exit status {returncode}'}"


def _collect(out: bytes) -> list[Any]:
    try:
        values = [json.loads(line) for line in out.splitlines() if line.strip()]
    except RecursionError:  # the worker could still write it; this thread's stack is deeper
        raise JqFilterError(
            "jq_filter produced a value nested too deeply to read; keep the match objects as they are"
        ) from None
    if len(values) == 1 and isinstance(values[0], list):
        return values[0]
    return values
