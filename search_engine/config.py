"""Engine-wide knobs that are not part of a search's identity.

These shape *how* a search runs (time limit, line width, which files are eligible) but two runs
with different values of them are still "the same search" for cursors, so they live here and
not in `SearchRequest`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

DEFAULT_EXCLUDES: tuple[str, ...] = (
    ".git",
    "node_modules",
    ".venv",
    "venv",
    "dist",
    "build",
    "target",
    "__pycache__",
    "*.lock",
    "package-lock.json",
    "*.min.js",
    "*.min.css",
    "*.map",
)


def default_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/codepager` (or the platform equivalent): never inside a searched repo."""
    return Path(platformdirs.user_cache_dir("codepager", appauthor=False))


@dataclass(frozen=True, slots=True)
class EngineConfig:
    timeout_s: float = 30.0
    max_line_width: int = 500
    max_file_size: int = 1024 * 1024
    default_excludes: tuple[str, ...] = DEFAULT_EXCLUDES
    cache_dir: Path = field(default_factory=default_cache_dir)
    embedding_profile: str = "static"
    embedding_model: str | None = None
