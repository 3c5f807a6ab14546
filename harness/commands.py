"""How tests and benchmarks launch codepager: the installed console script, as a client would."""

from __future__ import annotations

import sys
from pathlib import Path


def codepager_cmd() -> tuple[str, list[str]]:
    """The installed console script next to this interpreter (what a client would launch)."""
    script = Path(sys.executable).parent / "codepager"
    return str(script), []
