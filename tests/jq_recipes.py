"""Run a descriptor's jq recipe as an agent's shell would, with libjq standing in for the jq program.

Recipes are shell lines `SOURCE FILE | jq [FLAGS] PROGRAM` (SOURCE is head, tail or sed, which
every POSIX machine has). They are split with the shell's quoting rules; SOURCE runs for real
(no shell in between, so the quoted path must be exactly right) and its output goes to the
`jq` binding, with the jq command-line flags the recipes use emulated as jq prints: -r (strings
raw), -c (one compact line per value), -s (slurp all inputs into one array); without -c, values
are pretty-printed. Any other flag or shape fails loudly, so a new kind of recipe needs its
emulation here first instead of passing unchecked.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from typing import Any

import jq

FLAGS = frozenset({"-r", "-c", "-s"})


def _split(command: str) -> tuple[list[str], list[str], str]:
    """(source argv, jq flags, jq program) of `SOURCE ... | jq FLAGS... PROGRAM`."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = list(lexer)
    assert words.count("|") == 1, f"a recipe is one `SOURCE | jq ...` pipeline: {command}"
    pipe = words.index("|")
    source, (program_name, *flags, program) = words[:pipe], words[pipe + 1 :]
    assert program_name == "jq", command
    assert set(flags) <= FLAGS, f"jq flags {set(flags) - FLAGS} have no emulation here: {command}"
    return source, flags, program


def _print(value: Any, flags: list[str]) -> str:
    if "-r" in flags and isinstance(value, str):
        return value
    if "-c" in flags:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(value, ensure_ascii=False, indent=2)


def run_recipe(command: str) -> str:
    """What `command` prints, jq's part run on libjq."""
    source, flags, program = _split(command)
    done = subprocess.run(source, capture_output=True, timeout=30)
    assert done.returncode == 0, (command, done.stderr)
    values = jq.compile(program).input_text(done.stdout.decode("utf-8"), slurp="-s" in flags)
    return "".join(_print(value, flags) + "\n" for value in values)
