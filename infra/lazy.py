"""Package exports imported on first use (PEP 562 module `__getattr__`).

A package's `__init__` is the one place its users import from, so it names every export; but
some exports drag in costly dependencies (the index brings the numeric stack, the Redis store
the redis client) that a CLI command or a plain regex search never touches. Naming them here
instead of importing them keeps `import search_engine` / `import sessions` cheap, and the CLI's
start-up with it. Type checkers see the real names through an `if TYPE_CHECKING:` import.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, sources: dict[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package` that imports each name in `sources` from the
    module `sources[name]` when first asked for, and refuses every other name as Python would."""

    def __getattr__(name: str) -> Any:
        source = sources.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(source), name)

    return __getattr__
