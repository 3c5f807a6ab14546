"""`jq_filter`: an agent's jq expression applied to a result list, safely.

The expression comes from a model that may have read hostile text, so it runs as untrusted
code, with layered limits:
1. a lexer rejects the builtins that reach outside the input ($ENV, env, input_filename,
   $__loc__, input/inputs, debug/stderr, import/include, module metadata, search paths),
   looking inside string interpolations (`"\\(env)"`) but not inside plain strings or after a
   `.` (so `test("env")` and `.env` are fine);
2. the real jq binary runs in a subprocess with an empty environment, an empty working
   directory, the filter read from a file (so nothing is parsed as an option), an address
   space limit and a wall-clock timeout after which the process is killed;
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
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from server.output.jsontext import dumps_bytes

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
DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MEMORY_MB = 512
DEFAULT_MAX_OUTPUT_BYTES = 64 << 20
MAX_EXPRESSION_CHARS = 10_000

#: Runs argv[2:] under an address-space limit (argv[1], KiB). Through /bin/sh rather than
#: preexec_fn, which is unsafe in a threaded server; PWD is the one variable sh would add.
_SANDBOX = 'ulimit -v "$1" || exit 125; unset PWD; shift; exec "$@"'
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*")


class JqFilterError(ValueError):
    """The filter was refused, did not compile, failed at run time, or ran too long."""


class JqTimeoutError(JqFilterError, TimeoutError):
    pass


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
        raise JqFilterError("jq_filter is empty; pass a jq expression such as 'map(select(.match.score > 0.5))'")
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


def _jq_binary() -> str:
    path = shutil.which("jq") or ("/usr/bin/jq" if Path("/usr/bin/jq").exists() else None)
    if path is None:
        raise JqFilterError("jq_filter needs the jq program, which is not installed on the server (apt-get install jq)")
    return path


def apply_jq(
    records: Sequence[Any],
    expression: str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_mb: int = DEFAULT_MEMORY_MB,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
) -> list[Any]:
    """The values `expression` produces from `records` (see the module docstring for the shape)."""
    check_expression(expression)
    jq = _jq_binary()
    with tempfile.TemporaryDirectory(prefix="codepager-jq-") as work:
        filter_file = os.path.join(work, "filter.jq")
        with open(filter_file, "w", encoding="utf-8") as f:
            f.write(expression)
        input_file = os.path.join(work, "input.json")
        with open(input_file, "wb") as f:
            f.write(dumps_bytes(list(records)))
        argv = ["/bin/sh", "-c", _SANDBOX, "sh", str(memory_mb * 1024), jq, "-c", "-f", filter_file]
        with open(input_file, "rb") as stdin, tempfile.TemporaryFile() as stderr:
            proc = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=stderr, cwd=work, env={})
            out = _read_capped(proc, timeout_s, max_output_bytes)
            stderr.seek(0)
            err = stderr.read(4000).decode("utf-8", "replace").strip()
    if proc.returncode != 0:
        raise JqFilterError(_explain_failure(err, proc.returncode, memory_mb))
    return _collect(out)


def _read_capped(proc: subprocess.Popen[bytes], timeout_s: float, max_bytes: int) -> bytes:
    """Everything the process writes to stdout, killing it on timeout or when over the cap."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    too_slow = JqTimeoutError(
        f"jq_filter ran longer than {timeout_s:g} s and was stopped; simplify it or filter less data"
    )
    chunks: list[bytes] = []
    size = 0
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise too_slow
                if not sel.select(remaining):
                    continue
                chunk = os.read(proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    break
                size += len(chunk)
                if size > max_bytes:
                    raise JqFilterError(f"jq_filter produced more than {max_bytes >> 20} MiB of output and was stopped")
                chunks.append(chunk)
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
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
    if "compile error" in stderr or "syntax error" in stderr:
        return f"jq_filter does not compile: {stderr}"
    if returncode < 0 or "cannot allocate memory" in stderr or "Out of memory" in stderr:
        return f"jq_filter failed (exit {returncode}), probably over its {memory_mb} MiB memory limit: {stderr}"
    return f"jq_filter failed at run time: {stderr or f'exit status {returncode}'}"


def _collect(out: bytes) -> list[Any]:
    values = [json.loads(line) for line in out.splitlines() if line.strip()]
    if len(values) == 1 and isinstance(values[0], list):
        return values[0]
    return values
