"""`codepager` with some of its module constants set otherwise: how a test runs a real server
subprocess with a limit small enough to reach quickly (a 1 MiB request budget, one cached
session) when that limit is a constant of the module that uses it, not a setting.

The constants are assigned after import and before `main()` runs, so a module must read its
constant when it uses it (a global looked up at call time), never copy it into a default
argument: that is also what makes the in-process tests' `monkeypatch.setattr` reach it.
Production code has no hook for this; only this entry point, which only tests start, patches."""

from __future__ import annotations

import sys
from typing import Any


def patched_codepager_cmd(constants: dict[str, Any]) -> tuple[str, list[str]]:
    """The command (program, arguments before the subcommand) of `codepager` with each
    `"package.module.NAME": value` of `constants` set; values are written as Python literals."""
    lines = ["import importlib, sys"]
    for dotted, value in constants.items():
        module, _, name = dotted.rpartition(".")
        target = f"importlib.import_module({module!r})"
        lines.append(f"assert hasattr({target}, {name!r}), {dotted!r}")
        lines.append(f"setattr({target}, {name!r}, {value!r})")
    lines += ["from server.cli import main", "sys.exit(main())"]
    return sys.executable, ["-c", "; ".join(lines)]
